# Sourced by the perf scripts: the fast upstream (a static nginx answering the same 628 bytes as
# `fhircluster-load`'s compare/upstream.rs) as each process of a launcher whose data directory
# is OUT, on loopback ports from BASE.
#   fast_upstream_cluster OUT BASE WORKERS [EXTRA_CLUSTER_JSON]
# writes OUT/upstream.conf.in (nginx's configuration, its port @PORT@) and OUT/config.json
# (`server.port` BASE, `internalPort` BASE+1, one thread, each process that nginx on its $PORT;
# EXTRA_CLUSTER_JSON's settings added to `server.cluster`).
fast_upstream_cluster() {
    local out=$1 base=$2 workers=$3 extra=${4:-'{}'}
    local body
    body=$(python3 - <<'PY'
print(''.join([
 '{"resourceType":"Parameters","parameter":[{"name":"name","valueString":"LOINC"},',
 '{"name":"version","valueString":"2.8"},',
 '{"name":"display","valueString":"Systolic blood pressure"},',
 '{"name":"designation","part":[{"name":"language","valueCode":"en-US"},',
 '{"name":"use","valueCoding":{"system":"http://loinc.org","code":"LONG_COMMON_NAME"}},',
 '{"name":"value","valueString":"Systolic blood pressure"}]},',
 '{"name":"property","part":[{"name":"code","valueCode":"COMPONENT"},',
 '{"name":"value","valueString":"Pressure.systolic"}]},',
 '{"name":"property","part":[{"name":"code","valueCode":"CLASS"},',
 '{"name":"value","valueCoding":{"code":"BP.ATOM"}}]}]}']))
PY
)
    cat > "$out/upstream.conf.in" <<CONF
daemon off;
worker_processes 1;
pid $out/upstream-@PORT@.pid;
error_log $out/upstream-error.log warn;
events { worker_connections 16384; }
http {
    access_log off;
    client_body_temp_path $out/client_body;
    proxy_temp_path $out/proxy;
    fastcgi_temp_path $out/fastcgi;
    uwsgi_temp_path $out/uwsgi;
    scgi_temp_path $out/scgi;
    keepalive_requests 100000000;
    server {
        listen 127.0.0.1:@PORT@ backlog=16384;
        default_type application/fhir+json;
        location / { return 200 '$body'; }
    }
}
CONF
    local script="sed \"s/@PORT@/\$PORT/g\" '$out'/upstream.conf.in > '$out'/upstream-\"\$PORT\".conf && exec nginx -p '$out' -e '$out'/upstream-error.log -c '$out'/upstream-\"\$PORT\".conf"
    python3 - "$out/config.json" "$base" "$workers" "$script" "$extra" <<'PY'
import json, sys
path, base, workers, script, extra = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], json.loads(sys.argv[5])
cluster = {"workers": workers, "internalPort": base + 1, "command": ["sh", "-c", script],
           "killSeconds": 5, "proxyThreads": 1}
cluster.update(extra)
json.dump({"server": {"port": base, "cluster": cluster},
           "modules": {"tx": {"endpoints": [{"path": "/r4"}]}}}, open(path, "w"), indent=1)
PY
}
