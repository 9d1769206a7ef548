#!/usr/bin/env python3
# WAL frames written by the last_seen_at backlog, 64 sessions per transaction, in the order the
# notes arrived (random) and in session-id order, for a burst of 20,000 sessions created together
# and for 20,000 of all ages, on a copy of the schema with 200,000 sessions (Python sqlite3).
# usage: python3 bench/touch-frames.py [DB_PATH]
import sqlite3, os, glob, random, time
import sys
db=sys.argv[1] if len(sys.argv) > 1 else '/tmp/touch-frames.db'
for f in glob.glob(db+'*'): os.remove(f)
c=sqlite3.connect(db, isolation_level=None)
c.execute('PRAGMA journal_mode=WAL'); c.execute('PRAGMA wal_autocheckpoint=0')
for m in sorted(glob.glob(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'migrations', '*.sql'))): c.executescript(open(m).read())
N=200000
c.execute('BEGIN')
ids=[]
for i in range(N):
    sid='aws_%011x%011d' % (1796000000000 + i*3, i)
    ids.append(sid)
    c.execute("INSERT INTO anonymous_weather_sessions VALUES (?,?,?,?,?,?,?,NULL)", (sid, '%064x' % random.getrandbits(256), 'ios', '1.0', 'active', '2026-11-30T00:00:00Z', '2026-11-30T00:00:00Z'))
c.execute('COMMIT'); c.execute('PRAGMA wal_checkpoint(TRUNCATE)')
# a burst of 20,000 refreshed sessions created together (the last 20,000), noted in random order
burst=ids[-20000:]
def drain(order, label):
    stamp, name = label.split(' ', 1)
    c.execute('PRAGMA wal_checkpoint(TRUNCATE)')
    t0=time.time()
    for k in range(0, len(order), 64):
        c.execute('BEGIN IMMEDIATE')
        for sid in order[k:k+64]:
            c.execute("UPDATE anonymous_weather_sessions SET last_seen_at = ? WHERE id = ? AND last_seen_at < ?", (stamp, sid, stamp))
        c.execute('COMMIT')
    frames=c.execute('PRAGMA wal_checkpoint(PASSIVE)').fetchone()[1]
    print('%-15s %d chunks, %d WAL frames (%.1f per chunk), %.2f s' % (name, len(order)//64, frames, frames/(len(order)/64), time.time()-t0))
shuffled=burst[:]; random.shuffle(shuffled)
drain(shuffled, '2026-11-30T01:00:00Z random')
drain(sorted(burst), '2026-11-30T02:00:00Z sorted')
# sessions of all ages (uniform over the table)
spread=random.sample(ids, 20000)
drain(spread, '2026-11-30T03:00:00Z random-any-age')
drain(sorted(spread), '2026-11-30T04:00:00Z sorted-any-age')
