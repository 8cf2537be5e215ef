#!/bin/bash
set -euo pipefail
cat > /app/daemon/heartbeatctl <<'SH'
#!/bin/bash
# heartbeatctl - init-style control for heartbeatd
PIDFILE=/app/daemon/run/heartbeatd.pid
DAEMON=/app/daemon/heartbeatd.py

read_pid() { [ -f "$PIDFILE" ] && read -r pid < "$PIDFILE" && [[ $pid =~ ^[0-9]+$ ]]; }
is_running() { read_pid && kill -0 "$pid" 2>/dev/null; }

do_start() {
  if is_running; then echo "already running (pid $pid)"; return 0; fi
  mkdir -p "$(dirname "$PIDFILE")"
  rm -f "$PIDFILE"
  setsid python3 "$DAEMON" </dev/null >/dev/null 2>&1 &
  pid=$!
  echo "$pid" > "$PIDFILE"
  echo "started (pid $pid)"
}

do_stop() {
  if ! is_running; then rm -f "$PIDFILE"; echo "not running"; return 0; fi
  kill -TERM "$pid"
  for _ in $(seq 1 100); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then echo "failed to stop (pid $pid)" >&2; return 1; fi
  rm -f "$PIDFILE"
  echo "stopped"
}

case "${1:-}" in
  start) do_start ;;
  stop) do_stop ;;
  restart) do_stop >/dev/null && do_start ;;
  status)
    if is_running; then echo "running (pid $pid)"; exit 0
    elif [ -f "$PIDFILE" ]; then echo "dead but pidfile exists"; exit 1
    else echo "stopped"; exit 3; fi ;;
  *) echo "usage: $0 {start|stop|restart|status}" >&2; exit 2 ;;
esac
SH
chmod +x /app/daemon/heartbeatctl
