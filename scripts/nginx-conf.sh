#!/usr/bin/env bash
# Writes a private nginx.conf that wraps deploy/nginx/closet-weather.conf, changing only the
# listening port, the FastCGI socket path and where nginx keeps its own files and logs.
# NGINX_ACCESS_LOG: where the site's access log goes (DIR/access.log); `off` writes none (the
# benchmarks, whose floor and ceiling servers log nothing either). NGINX_SITE_ERROR_LEVEL: the
# site's error-log level (emerg, as shipped).
# Used by `make run`, the end-to-end tests and the benchmarks, so all three test the shipped file.
# usage: nginx-conf.sh PORT SOCKET DIR [EXTRA_SERVER_FILE]   (writes DIR/nginx.conf)
set -euo pipefail
port=$1 socket=$2 dir=$3 extra=${4:-}
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$dir"
access_log="access_log ${NGINX_ACCESS_LOG:-$dir/access.log} closet_weather;"
[ "${NGINX_ACCESS_LOG:-}" != off ] || access_log="access_log off;"
sed -e "s#listen 80;#listen 127.0.0.1:${port};#" \
    -e "s#listen \[::\]:80;##" \
    -e "s#unix:/run/closet-weather/weather.sock#unix:${socket}#" \
    -e "s#include fastcgi_params;#include /etc/nginx/fastcgi_params;#" \
    -e "s#access_log /var/log/nginx/closet-weather-access.log closet_weather;#${access_log}#" \
    -e "s#error_log /var/log/nginx/closet-weather-error.log emerg;#error_log $dir/closet-weather-error.log ${NGINX_SITE_ERROR_LEVEL:-emerg};#" \
    "$root/deploy/nginx/closet-weather.conf" > "$dir/server.conf"
cat > "$dir/nginx.conf" <<CONF
worker_processes ${NGINX_WORKERS:-1};
daemon off;
pid $dir/nginx.pid;
error_log $dir/nginx-error.log warn;
events { worker_connections 4096; }
http {
  # As Debian's stock nginx.conf: the MIME types by extension (the site must answer JSON anyway).
  include /etc/nginx/mime.types;
  access_log off;
  default_type application/octet-stream;
  client_body_temp_path $dir/client_body;
  fastcgi_temp_path $dir/fastcgi;
  proxy_temp_path $dir/proxy;
  uwsgi_temp_path $dir/uwsgi;
  scgi_temp_path $dir/scgi;
  include $dir/server.conf;
  ${extra:+include $extra;}
}
CONF
echo "$dir/nginx.conf"
