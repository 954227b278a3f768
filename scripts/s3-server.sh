#!/usr/bin/env bash
# A real S3-compatible server for tests: Ceph radosgw on one monitor and one memstore OSD, all on
# loopback and under one folder, with no systemd.
#
#   bash scripts/s3-server.sh start DIR   installs Ceph from apt when radosgw is missing, starts the
#                                         daemons, creates a user and a bucket, and prints
#                                         `export SPOOL_TEST_S3_...=` lines on stdout
#   bash scripts/s3-server.sh stop DIR    ends the daemons started under DIR and removes what start
#                                         put there (and DIR, when that leaves it empty)
#
# Everything but the export lines goes to stderr, so `eval "$(bash scripts/s3-server.sh start D)"`
# works. Starting again on a DIR whose server still answers only prints the lines again.
set -euo pipefail

ACCESS_ID=SPOOLTESTACCESSKEY01
SECRET=spool-test-secret-0123456789abcdefghijklmn
BUCKET=spool-test

say() { printf 's3-server: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

usage() { die "usage: $0 start|stop DIR"; }
[ $# -eq 2 ] || usage
cmd=$1
dir=$2

bun_bin() {
  if command -v bun >/dev/null; then command -v bun
  else echo "$(cd "$(dirname "$0")/.." && pwd)/node_modules/.bin/bun"; fi
}

# Whether a process exists and is not a zombie (init here may be slow to reap the daemons).
running() {
  local state
  state=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1
  [ -n "$state" ] && [ "$state" != Z ]
}

# Ends the daemons whose pid files are under DIR, checking first that each pid is still a Ceph
# daemon started with DIR's config (a stale pid file must not end someone else's process). The
# cluster keeps nothing worth a clean shutdown (memstore), and a SIGTERMed OSD waits 5 s for a
# monitor that may already be gone, so they get SIGKILL.
stop_daemons() {
  local pids=() f pid
  for f in "$dir"/run/*.pid; do
    [ -e "$f" ] || continue
    pid=$(cat "$f" 2>/dev/null || true)
    [ -n "$pid" ] || continue
    if tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -qF -- "--conf $dir/ceph.conf"; then
      kill -9 "$pid" 2>/dev/null || true
      pids+=("$pid")
    fi
  done
  for _ in $(seq 100); do
    local alive=0
    for pid in "${pids[@]}"; do if running "$pid"; then alive=1; fi; done
    [ "$alive" -eq 0 ] && return 0
    sleep 0.05
  done
  say "some daemons did not end: ${pids[*]}"
}

print_exports() {
  cat <<EOF
export SPOOL_TEST_S3_ENDPOINT=$1
export SPOOL_TEST_S3_ACCESS_ID=$ACCESS_ID
export SPOOL_TEST_S3_SECRET=$SECRET
export SPOOL_TEST_S3_BUCKET=$BUCKET
EOF
}

# Creates the bucket with a SigV4-signed PUT (Bun's S3Client cannot), retrying until radosgw
# answers; exits non-zero after $2 seconds.
create_bucket() {
  "$(bun_bin)" -e '
    const [endpoint, id, secret, bucket, waitS] = process.argv.slice(1);
    const hmac = (key, s) => new Bun.CryptoHasher("sha256", key).update(s).digest();
    const sha = (s) => new Bun.CryptoHasher("sha256").update(s).digest("hex");
    async function put() {
      const url = new URL(`/${bucket}`, endpoint);
      const amzDate = new Date().toISOString().replace(/[-:]|\.\d{3}/g, "");
      const day = amzDate.slice(0, 8);
      const region = "us-east-1";
      const payload = sha("");
      const headers = { host: url.host, "x-amz-content-sha256": payload, "x-amz-date": amzDate };
      const names = Object.keys(headers).sort();
      const canonicalHeaders = names.map((n) => `${n}:${headers[n]}\n`).join("");
      const canonical = ["PUT", url.pathname, "", canonicalHeaders, names.join(";"), payload].join("\n");
      const scope = `${day}/${region}/s3/aws4_request`;
      const toSign = ["AWS4-HMAC-SHA256", amzDate, scope, sha(canonical)].join("\n");
      let key = hmac(`AWS4${secret}`, day);
      for (const part of [region, "s3", "aws4_request"]) key = hmac(key, part);
      const sig = new Bun.CryptoHasher("sha256", key).update(toSign).digest("hex");
      const auth = `AWS4-HMAC-SHA256 Credential=${id}/${scope}, SignedHeaders=${names.join(";")}, Signature=${sig}`;
      const { host, ...sent } = headers;
      return fetch(url, { method: "PUT", headers: { ...sent, authorization: auth } });
    }
    const deadline = Date.now() + Number(waitS) * 1000;
    for (;;) {
      let problem;
      try {
        const res = await put();
        const text = await res.text();
        if (res.ok || text.includes("BucketAlreadyOwnedByYou")) process.exit(0);
        problem = `HTTP ${res.status} ${text.slice(0, 300)}`;
      } catch (err) {
        problem = String(err);
      }
      if (Date.now() > deadline) { console.error(`bucket create failed: ${problem}`); process.exit(1); }
      await Bun.sleep(200);
    }
  ' "$@"
}

free_port() {
  "$(bun_bin)" -e 'const s = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } }); console.log(s.port); s.stop(true);'
}

failed() {
  local code=$?
  say "start failed; last lines of the logs in $dir/log:"
  tail -n 8 "$dir"/log/*.log >&2 2>/dev/null || true
  stop_daemons
  exit "$code"
}

install_ceph() {
  # Every tool start runs, not only radosgw: a machine may have radosgw without the monitor's tools.
  command -v radosgw >/dev/null && command -v ceph-mon >/dev/null && command -v ceph-osd >/dev/null && command -v monmaptool >/dev/null && return 0
  say "installing radosgw, ceph-mon and ceph-osd from apt"
  local started=$SECONDS
  export DEBIAN_FRONTEND=noninteractive
  local pkgs=(radosgw ceph-mon ceph-osd) sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || die "radosgw is not installed and installing it needs root (or sudo)"
    sudo=(sudo -n env DEBIAN_FRONTEND=noninteractive)
  fi
  if ! "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >"$dir/apt.log" 2>&1; then
    say "install failed; running apt-get update and trying again"
    "${sudo[@]}" apt-get update -qq >>"$dir/apt.log" 2>&1 || true
    "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >>"$dir/apt.log" 2>&1 || {
      tail -20 "$dir/apt.log" >&2
      die "apt-get install failed (log: $dir/apt.log)"
    }
  fi
  say "installed in $((SECONDS - started)) s"
}

start() {
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  if [ -f "$dir/endpoint" ] && create_bucket "$(cat "$dir/endpoint")" "$ACCESS_ID" "$SECRET" "$BUCKET" 0 2>/dev/null; then
    say "already running at $(cat "$dir/endpoint")"
    print_exports "$(cat "$dir/endpoint")"
    return 0
  fi
  stop_daemons
  rm -rf "$dir/mon" "$dir/osd" "$dir/run" "$dir/log" "$dir/ceph.conf" "$dir/endpoint"
  install_ceph
  local started=$SECONDS
  mkdir -p "$dir/mon" "$dir/osd" "$dir/run" "$dir/log"
  # A start that fails half-way leaves no daemons behind, and shows why.
  trap 'failed' EXIT

  local fsid mon_port rgw_port conf=$dir/ceph.conf
  fsid=$(cat /proc/sys/kernel/random/uuid)
  mon_port=$(free_port)
  rgw_port=$(free_port)
  cat >"$conf" <<EOF
[global]
fsid = $fsid
mon host = v2:127.0.0.1:$mon_port
public addr = 127.0.0.1
cluster addr = 127.0.0.1
ms bind msgr1 = false
auth cluster required = none
auth service required = none
auth client required = none
# With auth off these are needed too, or radosgw hangs for 300 s (shared/notes/infra.md).
ms mon client mode = crc secure
ms client mode = crc secure
ms mon cluster mode = crc secure
ms mon service mode = crc secure
ms cluster mode = crc secure
ms service mode = crc secure
run dir = $dir/run
admin socket = $dir/run/\$name.asok
pid file = $dir/run/\$name.pid
log file = $dir/log/\$name.log
mon data = $dir/mon/\$name
osd data = $dir/osd/\$name
osd objectstore = memstore
memstore device bytes = 1073741824
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool size one = true
mon warn on pool no redundancy = false
mon allow pool delete = true
mon pg warn min per osd = 0
mon max pg per osd = 1000
mgr initial modules =
debug ms = 0
# Commit map changes at once (default 1 s each): radosgw creates its pools one by one.
paxos propose interval = 0.01
paxos min wait = 0.01

[client.rgw.spool]
rgw frontends = beast endpoint=127.0.0.1:$rgw_port
rgw enable usage log = false
EOF

  monmaptool --create --clobber --fsid "$fsid" --addv a "[v2:127.0.0.1:$mon_port]" "$dir/run/monmap" >/dev/null
  ceph-mon --conf "$conf" --mkfs -i a --monmap "$dir/run/monmap" >>"$dir/log/setup.log" 2>&1
  ceph-mon --conf "$conf" -i a >>"$dir/log/setup.log" 2>&1

  local osd_uuid osd_id
  osd_uuid=$(cat /proc/sys/kernel/random/uuid)
  osd_id=$(timeout 30 ceph --conf "$conf" osd new "$osd_uuid" 2>>"$dir/log/setup.log") || die "ceph osd new failed"
  mkdir -p "$dir/osd/osd.$osd_id"
  ceph-osd --conf "$conf" -i "$osd_id" --mkfs --osd-uuid "$osd_uuid" >>"$dir/log/setup.log" 2>&1
  ceph-osd --conf "$conf" -i "$osd_id" >>"$dir/log/setup.log" 2>&1

  radosgw --conf "$conf" -n client.rgw.spool >>"$dir/log/setup.log" 2>&1

  timeout 60 radosgw-admin --conf "$conf" -n client.rgw.spool user create --uid=spool-test --display-name="spool tests" \
    --access-key="$ACCESS_ID" --secret-key="$SECRET" >>"$dir/log/setup.log" 2>&1 || die "radosgw-admin user create failed"

  local endpoint=http://127.0.0.1:$rgw_port
  create_bucket "$endpoint" "$ACCESS_ID" "$SECRET" "$BUCKET" 45 || die "radosgw did not come up"
  echo "$endpoint" >"$dir/endpoint"
  trap - EXIT
  say "radosgw ready at $endpoint in $((SECONDS - started)) s"
  print_exports "$endpoint"
}

case $cmd in
  start) start ;;
  stop)
    [ -d "$dir" ] || exit 0
    stop_daemons
    # Only what start made, so that a mistyped DIR loses nothing else.
    rm -rf "$dir/mon" "$dir/osd" "$dir/run" "$dir/log" "$dir/ceph.conf" "$dir/endpoint" "$dir/apt.log"
    rmdir "$dir" 2>/dev/null || true
    ;;
  *) usage ;;
esac
