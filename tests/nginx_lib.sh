# shellcheck shell=bash
# tests/nginx_lib.sh - Debian's nginx as a witness: its own config file under
# a directory of the test's, its defaults otherwise (sendfile on), a loopback
# port, and its access log, one line per request it answered. Sourced by
# t_req_socket_nginx.sh and tools/bench_socket.sh (after lib.sh or
# bench_lib.sh, which give fail/die and TMP).
#
#   nginx_start DIR WORKERS   sets NGX_PID (the master), NGX_PORT, NGX_DIR
#   nginx_log_lines           requests in the access log so far
#   nginx_stop
# DIR/html holds k1.html (1 KiB), big.bin (20 MiB), text.txt (gzip's, under /gz/).

_ngx_die() { if declare -F fail >/dev/null; then fail "$@"; else die "$@"; fi; }

nginx_start() {
	NGX_DIR=$1
	local workers=$2 i
	mkdir -p "$NGX_DIR/html" "$NGX_DIR/logs" || _ngx_die "cannot make $NGX_DIR"
	head -c 1024 /dev/zero | tr '\0' a >"$NGX_DIR/html/k1.html"
	[ -s "$NGX_DIR/html/big.bin" ] || head -c $((20 << 20)) /dev/zero >"$NGX_DIR/html/big.bin"
	for i in $(seq 200); do echo "line $i of a text that compresses well, well, well"; done >"$NGX_DIR/html/text.txt"
	NGX_PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	cat >"$NGX_DIR/nginx.conf" <<CONF
user root;   # the workers read files under the test's private directory
worker_processes $workers;
pid $NGX_DIR/nginx.pid;
error_log $NGX_DIR/logs/error.log;
events { worker_connections 1024; }
http {
    include /etc/nginx/mime.types;
    access_log $NGX_DIR/logs/access.log;
    client_body_temp_path $NGX_DIR/cb; proxy_temp_path $NGX_DIR/px; fastcgi_temp_path $NGX_DIR/fc;
    uwsgi_temp_path $NGX_DIR/uw; scgi_temp_path $NGX_DIR/sc;
    server {
        listen 127.0.0.1:$NGX_PORT;
        root $NGX_DIR/html;
        location /gz/ { gzip on; gzip_min_length 1; gzip_types text/plain; alias $NGX_DIR/html/; }
    }
}
CONF
	nginx -c "$NGX_DIR/nginx.conf" || _ngx_die "nginx did not start: $(tail -n3 "$NGX_DIR/logs/error.log" 2>/dev/null)"
	_ngx_up() { [ -s "$NGX_DIR/nginx.pid" ] && [ "$(pgrep -c -P "$(cat "$NGX_DIR/nginx.pid")")" -ge "$workers" ]; }
	for i in $(seq 100); do _ngx_up && break; sleep 0.1; done
	_ngx_up || _ngx_die "nginx's $workers workers did not come up"
	NGX_PID=$(cat "$NGX_DIR/nginx.pid")
}

nginx_log_lines() { if [ -f "$NGX_DIR/logs/access.log" ]; then wc -l <"$NGX_DIR/logs/access.log"; else echo 0; fi; }

nginx_stop() {
	[ -n "${NGX_PID:-}" ] || return 0
	kill -QUIT "$NGX_PID" 2>/dev/null
	for _ in $(seq 50); do kill -0 "$NGX_PID" 2>/dev/null || break; sleep 0.1; done
	kill -KILL "$NGX_PID" 2>/dev/null
	NGX_PID=
}
