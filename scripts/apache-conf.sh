#!/usr/bin/env bash
# Writes a private httpd.conf that wraps deploy/apache/closet-weather.conf (the VPS virtual host,
# mod_proxy_fcgi), changing only the address it listens on, the FastCGI socket path, the document
# root and where Apache keeps its logs and pid. Run it with `apache2 -f DIR/httpd.conf -DFOREGROUND`
# (no system service involved). Used by the end-to-end tests, so they test the shipped file.
# usage: apache-conf.sh PORT SOCKET DIR   (writes DIR/httpd.conf, DIR/site.conf, DIR/htdocs)
set -euo pipefail
port=$1 socket=$2 dir=$3
root=$(cd "$(dirname "$0")/.." && pwd)
mods=/usr/lib/apache2/modules
mkdir -p "$dir/logs" "$dir/htdocs"
cp "$root/htdocs/privacy.html" "$dir/htdocs/"
sed -e "s#<VirtualHost \*:80>#<VirtualHost 127.0.0.1:${port}>#" \
    -e "s#unix:/run/closet-weather/weather.sock#unix:${socket}#g" \
    -e "s#/var/www/closet-weather/htdocs#${dir}/htdocs#g" \
    -e "s#\${APACHE_LOG_DIR}#${dir}/logs#g" \
    "$root/deploy/apache/closet-weather.conf" > "$dir/site.conf"
cat > "$dir/httpd.conf" <<CONF
ServerRoot /etc/apache2
PidFile $dir/httpd.pid
Listen 127.0.0.1:$port
ServerName localhost
User nobody
Group nogroup
ErrorLog $dir/logs/error.log
LogLevel warn
LoadModule mpm_event_module $mods/mod_mpm_event.so
LoadModule authz_core_module $mods/mod_authz_core.so
LoadModule mime_module $mods/mod_mime.so
LoadModule dir_module $mods/mod_dir.so
LoadModule headers_module $mods/mod_headers.so
LoadModule proxy_module $mods/mod_proxy.so
LoadModule proxy_fcgi_module $mods/mod_proxy_fcgi.so
LoadModule unique_id_module $mods/mod_unique_id.so
LoadModule setenvif_module $mods/mod_setenvif.so
TypesConfig /etc/mime.types
<Directory />
    AllowOverride None
    Require all denied
</Directory>
Include $dir/site.conf
CONF
echo "$dir/httpd.conf"
