#!/bin/sh
# test_hub.sh — publishing to the Hugging Face Hub without the internet: tests/hub/hub_server.py
# stands in for the Hub on 127.0.0.1 (it checks the auth header, paths and commit payloads, logs
# every request with the token redacted, and injects faults), and huggingface_hub itself
# ($PTRAIN_PYTHON, tests/hub/hub_check.py: `selftest` checks the stand-in against the real client
# once, `readback` downloads what ptrain pushed and compares it byte for byte with the run's files).
# Cases: hub_strategy checkpoint, sequenced with the server's hold file (the adapter at the root,
# only the newest checkpoint in last-checkpoint/) and all_checkpoints; private by default as the
# server sees it, public with hub_private: false; the request sequence and headers (no token to LFS
# storage URLs); a server that holds every request until training has logged its last step
# (training never waits for uploads; the median step time against a run without pushing is printed,
# not asserted); resumes: last-checkpoint/ cleaned from the repository's own listing (paged), a
# commit whose answer was lost (412, nothing committed twice), the server down (exit 0 at once, no
# waiting out hub_upload_timeout, the report with the hf upload commands), `ptrain push` finishing,
# leftover and half-made job directories; SIGTERM during the final wait; 401 (one clear message, no
# retry); 403 on create for an existing repository; 503 twice then success, Retry-After; a 5xx and a
# dropped connection on an LFS PUT during training; a non-retryable curl error; multipart LFS; no
# token at all; the token file instead of HF_TOKEN; a token in the config file (quoted key, flow
# style, nested, block scalar, alias) in no checkpoint and no uploaded file; the token in no
# output and no file under output_dir; huggingface_save: the merged model read back from
# hf_model_name.
. "$PTRAIN_SRCDIR/tests/tap.sh"
. "$PTRAIN_SRCDIR/tests/tiny.sh"
P=${PTRAIN:?set PTRAIN to the ptrain binary}
HERE=$PTRAIN_SRCDIR/tests/hub
tmp=$(mktemp -d)
srv_pid=""
stop_server() {
    [ -n "$srv_pid" ] && kill "$srv_pid" 2>/dev/null && wait "$srv_pid" 2>/dev/null
    srv_pid=""
}
trap 'stop_server; rm -rf "$tmp"' EXIT
if ! command -v python3 >/dev/null; then
    echo "1..0 # SKIP python3 (for tests/hub/hub_server.py) not found"
    exit 0
fi
TOKEN=hf_ptraintest$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
PY=${PTRAIN_PYTHON:-}
NO_PY=""
if [ -z "$PY" ]; then
    NO_PY="PTRAIN_PYTHON is unset (set it to a python with huggingface_hub)"
elif ! "$PY" -c "import huggingface_hub" 2>/dev/null; then
    NO_PY="$PY has no huggingface_hub"
fi

start_server() { # start_server NAME [server options]: serves $tmp/NAME/srv; sets EP, LOG, SRV
    d=$tmp/$1
    shift
    mkdir -p "$d"
    rm -f "$d/port"
    python3 "$HERE/hub_server.py" --root "$d/srv" --token "$TOKEN" --log "$d/req.log" --port-file "$d/port" \
        --user tester "$@" >"$d/server.out" 2>&1 &
    srv_pid=$!
    i=0
    while [ ! -s "$d/port" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
    EP=http://127.0.0.1:$(cat "$d/port")
    LOG=$d/req.log
    SRV=$d/srv
}
faults() { # faults JSON: change the running server's faults; prints its fault state
    python3 -c 'import json,sys,urllib.request as u
r=u.Request(sys.argv[1]+"/_test/faults",data=(sys.argv[2] or None) and sys.argv[2].encode(),method="POST" if sys.argv[2] else "GET")
print(json.dumps(json.load(u.urlopen(r))))' "$EP" "$1"
}
held_now() { faults "" | python3 -c 'import json,sys; print(json.load(sys.stdin)["held_now"])'; }
wait_for() { # wait_for FILE PATTERN: up to 60 s for a line matching PATTERN
    i=0
    while ! grep -q "$2" "$1" 2>/dev/null && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
}
# cfg NAME STRATEGY [yaml]: a 6-step run saving at 3 and 6 in $tmp/NAME/run, config $tmp/NAME/c.yaml
cfg() {
    d=$tmp/$1
    mkdir -p "$d"
    tiny_config "$d/c.yaml" "$d/run" "max_steps: 6
save_steps: 3
logging_steps: 3
push_to_hub: true
hub_model_id: tester/$1
hub_strategy: $2
${3:-}"
}
run() { # run CONFIG OUT [env...]: ptrain on CONFIG against $EP; stdout OUT.out, stderr OUT.err; sets rc
    c=$1 o=$2
    shift 2
    env HF_ENDPOINT="$EP" HF_TOKEN="$TOKEN" HF_HOME="$tmp/hf_home" "$@" "$P" "$c" >"$o.out" 2>"$o.err"
    rc=$?
    return $rc
}
train() { # train NAME STRATEGY [yaml] [env...]
    cfg "$1" "$2" "${3:-}"
    shift 2
    [ $# -gt 0 ] && shift
    run "$d/c.yaml" "$d/run" "$@"
}
readback() { # readback NAME REPO EXPECT_DIR [hub_check options]
    if [ -n "$NO_PY" ]; then
        skip_test "$1" "readback with huggingface_hub: $NO_PY"
        return
    fi
    n=$1 repo=$2 exp=$3
    shift 3
    ok "$n" "$PY" "$HERE/hub_check.py" readback --endpoint "$EP" --token "$TOKEN" --repo "$repo" --expect "$exp" "$@"
}
requests() { # requests [python filter]: "METHOD PATH STATUS FAULT" per request of ptrain (log lines past $FROM)
    python3 -c 'import json,sys
for i, l in enumerate(open(sys.argv[1])):
    r=json.loads(l)
    if i >= int(sys.argv[3]) and r["headers"].get("user-agent", "").startswith("ptrain/") and eval(sys.argv[2]):
        print(r["method"], r["path"], r["status"], r.get("fault") or "")' "$LOG" "${1:-True}" "${FROM:-0}" 2>/dev/null
}
log_lines() { wc -l <"$LOG" | tr -d ' '; }
commit_file() { # commit_file REPO PATH TEXT: a commit someone else makes (not ptrain)
    TOKEN="$TOKEN" python3 -c 'import base64,json,os,sys,urllib.request as u
lines=[{"key":"header","value":{"summary":"by hand","description":""}},
       {"key":"file","value":{"content":base64.b64encode(sys.argv[4].encode()).decode(),"path":sys.argv[3],"encoding":"base64"}}]
r=u.Request(sys.argv[1]+"/api/models/"+sys.argv[2]+"/commit/main",data="".join(json.dumps(l)+"\n" for l in lines).encode(),
  headers={"Content-Type":"application/x-ndjson","Authorization":"Bearer "+os.environ["TOKEN"]},method="POST")
u.urlopen(r).read()' "$EP" "$1" "$2" "$3"
}
statuses() { requests "$1" | awk '{printf "%s%s", sep, $3; sep=" "}'; } # statuses FILTER: "503 503 200"
no_token_in() { ! grep -r -q -F "$TOKEN" "$@"; }
repo_ls() { ls "$SRV/$1/files/$2" 2>/dev/null | tr '\n' ' ' | sed 's/ $//'; } # repo_ls REPO DIR
median_tps() { # median tokens/s of a run's metrics.jsonl
    python3 -c 'import json,sys,statistics
print(round(statistics.median(json.loads(l)["tokens_per_s"] for l in open(sys.argv[1]))))' "$1"
}

# --- the stand-in itself, against the real client (once)
if [ -n "$NO_PY" ]; then
    skip_test "hub_check.py selftest: the stand-in speaks the Hub's API as huggingface_hub expects" "$NO_PY"
else
    ok "hub_check.py selftest: the stand-in speaks the Hub's API as huggingface_hub expects" \
        sh -c "'$PY' '$HERE/hub_check.py' selftest >'$tmp/selftest.out' 2>&1 || { cat '$tmp/selftest.out'; false; }"
fi

# --- hub_strategy checkpoint, sequenced with the hold file: every request waits until the run has
# staged everything (its final wait began), so which pushes a newer one supersedes is fixed: the
# adapter and card at the root, only the newest checkpoint in last-checkpoint/
start_server ckpt --hold-file "$tmp/ckpt/release"
cfg ckpt checkpoint
run "$d/c.yaml" "$d/run" &
pid=$!
wait_for "$d/run.out" "waiting up to"
held=$(held_now)
ok "checkpoint: the run staged everything and began its final wait while the server held the first upload" \
    sh -c "grep -q 'step 6/6' '$d/run.out' && [ $held -ge 1 ] && ! grep -q 'pushed' '$d/run.out'"
touch "$d/release"
wait $pid
expect_eq "checkpoint: the run exits 0" 0 "$?"
ok "checkpoint: every push done" grep -q "every push done" "$d/run.out"
ok "checkpoint: nothing left staged in output_dir/hub" test -z "$(ls "$d/run/hub")"
mkdir -p "$d/exp/last-checkpoint" "$tmp/adapter"
cp "$d/run/lora/adapter_config.json" "$d/run/lora/adapter_model.safetensors" "$d/exp/"
cp "$d/run/checkpoint-6.h5" "$d/exp/last-checkpoint/"
cp "$d/run/lora/adapter_config.json" "$d/run/lora/adapter_model.safetensors" "$tmp/adapter/"
readback "checkpoint: huggingface_hub reads back the final adapter and last-checkpoint/ (private)" \
    tester/ckpt "$d/exp" --private
expect_eq "checkpoint: last-checkpoint/ holds only the newest checkpoint" checkpoint-6.h5 \
    "$(repo_ls tester/ckpt last-checkpoint)"
ok "checkpoint: the model card names library_name peft and the settings" \
    sh -c "grep -q '^library_name: peft' '$SRV/tester/ckpt/files/README.md' &&
           grep -q '| lora_r | 4 |' '$SRV/tester/ckpt/files/README.md'"
ok "hub_private default: one create request, asking for visibility private (no \"private\" field)" \
    sh -c "[ \$(grep -c '/api/repos/create' '$LOG') = 1 ] &&
           grep '/api/repos/create' '$LOG' | grep -q '\"visibility\": \"private\"' &&
           ! grep '/api/repos/create' '$LOG' | grep -q '\"private\": '"
expect_eq "the client's requests, in order (first push; the tree listing of a checkpoint push left out)" \
    "POST /api/repos/create 200 
POST /api/models/tester/ckpt/preupload/main 200 
POST /tester/ckpt.git/info/lfs/objects/batch 200 
PUT /_lfs/ 200 
POST /tester/ckpt.git/info/lfs/objects/verify 200 
POST /api/models/tester/ckpt/commit/main 200 " \
    "$(requests 'r["method"] != "GET"' | head -6 | sed 's|^PUT /_lfs/[^ ]*|PUT /_lfs/|')"
ok "every API request carried the (redacted) Bearer token, verify too; no LFS PUT did" python3 -c 'import json,sys
rs=[r for r in map(json.loads, open(sys.argv[1])) if r["headers"].get("user-agent", "").startswith("ptrain/")]
api=[r for r in rs if not r["path"].startswith("/_lfs/")]
put=[r for r in rs if r["path"].startswith("/_lfs/")]
sys.exit(not (api and put and any("/verify" in r["path"] for r in api)
    and all(r["headers"].get("authorization")=="Bearer <REDACTED>" for r in api)
    and not any("authorization" in r["headers"] for r in put)))' "$LOG"
ok "every commit names its parent (parentCommit: the head the preupload saw)" python3 -c 'import json,sys
cs=[r for r in map(json.loads, open(sys.argv[1])) if "/commit/" in r["path"]]
sys.exit(not (cs and all(c["commit"][0]["value"].get("parentCommit") for c in cs)))' "$LOG"
ok "the User-Agent names ptrain and its version" grep -q '"user-agent": "ptrain/[0-9]' "$LOG"
ok "the token is in no output, no file under output_dir and not in the request log" \
    no_token_in "$d/run.out" "$d/run.err" "$d/run" "$LOG"
stop_server

# --- a server that holds every request until training has logged its last step: training runs
# every step while its uploads wait (it never waits for them), then the bounded wait uploads all.
# all_checkpoints: each checkpoint under checkpoint-N/; hub_private: false
start_server hold --hold-file "$tmp/hold/release"
cfg hold all_checkpoints "hub_private: false"
sed -i 's/^logging_steps: 3$/logging_steps: 1/' "$d/c.yaml"
run "$d/c.yaml" "$d/run" &
pid=$!
wait_for "$d/run.out" "step 6/6"
i=0
while [ "$(held_now)" -lt 1 ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
held=$(held_now)
ok "hold: training logged its last step (6/6) while the server held its first upload request" \
    sh -c "grep -q 'step 6/6' '$d/run.out' && [ $held -ge 1 ] && ! grep -q 'pushed' '$d/run.out'"
touch "$d/release"
wait $pid
expect_eq "hold: once released, the run exits 0" 0 $?
ok "hold: the final wait pushed everything" grep -q "every push done" "$d/run.out"
sed 's/^push_to_hub: true$/push_to_hub: false/; s|/hold/run|/hold/nopush|' "$d/c.yaml" >"$d/nopush.yaml"
run "$d/nopush.yaml" "$d/nopush"
echo "# step time: median $(median_tps "$d/run/metrics.jsonl") tokens/s with every upload held," \
    "$(median_tps "$d/nopush/metrics.jsonl") tokens/s without pushing (same steps; not asserted)"
mkdir -p "$d/exp/checkpoint-3" "$d/exp/checkpoint-6"
cp "$d/run/lora/adapter_config.json" "$d/run/lora/adapter_model.safetensors" "$d/exp/"
cp "$d/run/checkpoint-3.h5" "$d/exp/checkpoint-3/"
cp "$d/run/checkpoint-6.h5" "$d/exp/checkpoint-6/"
readback "all_checkpoints: huggingface_hub reads back the adapter, checkpoint-3/ and checkpoint-6/ (public)" \
    tester/hold "$d/exp" --public
stop_server

# --- resumes (hub_strategy checkpoint): each run cleans last-checkpoint/ from the repository's own
# listing (paged here, one entry a page), not from memory
start_server resume
faults '{"tree_page": 1}' >/dev/null
cfg resume checkpoint "hub_upload_timeout: 600"
sed 's/^max_steps: 6$/max_steps: 3/' "$d/c.yaml" >"$d/c3.yaml"
run "$d/c3.yaml" "$d/r3"
ok "resume: a first run to step 3 pushes last-checkpoint/checkpoint-3.h5" \
    sh -c "[ $rc = 0 ] && grep -q 'every push done' '$d/r3.out' && [ '$(repo_ls tester/resume last-checkpoint)' = checkpoint-3.h5 ]"
commit_file tester/resume last-checkpoint/stale.txt "left by someone else"
for s in 6 9 12 15; do
    sed "s/^max_steps: 6\$/max_steps: $s/" "$d/c.yaml" >"$d/c$s.yaml"
    echo "resume_from_checkpoint: true" >>"$d/c$s.yaml"
done
faults '{"lose_answer": [{"count": 1, "match": "/commit/"}]}' >/dev/null
run "$d/c6.yaml" "$d/r6"
expect_eq "resume to step 6: exit 0" 0 "$rc"
expect_eq "resume to step 6: last-checkpoint/ holds only checkpoint-6.h5 (stale.txt, not ptrain's, matched too)" \
    checkpoint-6.h5 "$(repo_ls tester/resume last-checkpoint)"
ok "resume: step 3's checkpoint was deleted by a commit of the resumed run" python3 -c 'import json,sys
cs=[r for r in map(json.loads, open(sys.argv[1])) if "/commit/" in r["path"] and r["status"] == 200]
sys.exit(not any(l["key"] == "deletedFile" and l["value"]["path"] == "last-checkpoint/checkpoint-3.h5"
                 for c in cs for l in c["commit"]))' "$LOG"
ok "resume: the listing was read page by page (Link: rel=next)" grep -q '"query": "recursive=true&cursor=1"' "$LOG"
expect_eq "a commit whose answer was lost: retried, 412 (the parent moved), then nothing committed twice" \
    "0 412" "$(statuses '"/commit/" in r["path"] and r["status"] != 200')"
bad404=$(requests 'r["status"] == 404 and "/tree/" not in r["path"]')
ok "... and every push of that run done, no deletedFile of a missing file (404)" \
    sh -c "grep -q 'every push done' '$d/r6.out' && [ -z '$bad404' ]"
faults '{"down": true}' >/dev/null
t0=$(date +%s)
run "$d/c9.yaml" "$d/r9"
t1=$(date +%s)
expect_eq "server down: the run to step 9 still exits 0" 0 "$rc"
ok "server down: no waiting out hub_upload_timeout (600 s) once the Hub proves unreachable" test $((t1 - t0)) -lt 30
ok "server down: the report says what was not pushed" grep -q "not pushed: the final adapter to tester/resume" "$d/r9.out"
ok "server down: ... with the hf upload command, HF_ENDPOINT first (not the default Hub)" \
    grep -q "HF_ENDPOINT=$EP hf upload tester/resume $d/run/hub/[0-9]*-adapter-final/files . --private --commit-message" \
    "$d/r9.out"
ok "server down: ... and ptrain push" grep -q "ptrain push $d/run\$" "$d/r9.out"
ok "server down: a warning on stderr" grep -q "did not finish" "$d/r9.err"
ok "server down: the jobs stay staged (job.json last, files as in the repo)" \
    sh -c "ls '$d'/run/hub/*-adapter-final/job.json '$d'/run/hub/*-adapter-final/files/adapter_model.safetensors >/dev/null"
faults '{"down": false}' >/dev/null
# a link planted in a staged job (output_dir on shared scratch): never followed, never uploaded
secret=victim-$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')
echo "$secret" >"$d/victim.txt"
job=$(ls -d "$d"/run/hub/*-adapter-final)
ln -s "$d/victim.txt" "$job/files/stolen.txt"
env HF_ENDPOINT="$EP" HF_TOKEN="$TOKEN" "$P" push "$d/run" >"$d/push0.out" 2>"$d/push0.err"
ok "ptrain push, a link planted in a staged job: refused, naming it" \
    grep -q "refusing to read $job/files/stolen.txt: it is a symbolic link" "$d/push0.out" "$d/push0.err"
ok "... and nothing of the linked file reached the Hub" \
    sh -c "! grep -rqF '$secret' '$SRV' '$LOG'"
rm -f "$job/files/stolen.txt"
env HF_ENDPOINT="$EP" HF_TOKEN="$TOKEN" "$P" push "$d/run" >"$d/push.out" 2>"$d/push.err"
expect_eq "ptrain push OUTPUT_DIR: exit 0" 0 $?
ok "ptrain push: nothing left staged" test -z "$(ls "$d/run/hub")"
expect_eq "ptrain push: last-checkpoint/ holds only checkpoint-9.h5" checkpoint-9.h5 "$(repo_ls tester/resume last-checkpoint)"
mkdir -p "$d/exp"
cp "$d/run/lora/adapter_config.json" "$d/run/lora/adapter_model.safetensors" "$d/exp/"
readback "ptrain push: huggingface_hub reads back the adapter (private)" tester/resume "$d/exp" --private
faults '{"down": true}' >/dev/null
run "$d/c12.yaml" "$d/r12"
final=$(ls -d "$d"/run/hub/*-adapter-final)
mv "$final" "$d/run/hub/1000-adapter-final" # numbers past 999
mkdir -p "$d/run/hub/000999-half/files" "$d/run/hub/.gone-000998-old/files" # what kills leave
faults '{"down": false}' >/dev/null
run "$d/c15.yaml" "$d/r15"
ok "leftovers: the staged pushes of the run to step 12 go first (job 1000 included)" \
    grep -q "2 pushes left by an earlier run go first" "$d/r15.out"
ok "leftovers: the resumed run ends with nothing staged, half-made job directories removed" \
    sh -c "[ $rc = 0 ] && grep -q 'every push done' '$d/r15.out' && [ -z \"\$(ls -A '$d/run/hub')\" ]"
expect_eq "leftovers: last-checkpoint/ holds only checkpoint-15.h5" checkpoint-15.h5 \
    "$(repo_ls tester/resume last-checkpoint)"
ok "resumes: the token is in no output and no file under output_dir" \
    no_token_in "$d"/*.out "$d"/*.err "$d/run" "$LOG"
stop_server

# --- SIGTERM during the final wait: the wait ends at once, the report is printed, training's status
start_server term --hold
cfg term end "hub_upload_timeout: 600"
(exec env HF_ENDPOINT="$EP" HF_TOKEN="$TOKEN" "$P" "$d/c.yaml" >"$d/run.out" 2>"$d/run.err") &
pid=$!
wait_for "$tmp/term/run.out" "waiting up to"
t0=$(date +%s)
kill -TERM $pid
wait $pid
rc=$?
t1=$(date +%s)
expect_eq "SIGTERM in the final wait: exit 0 (training's status)" 0 "$rc"
ok "SIGTERM in the final wait: exits within seconds, not hub_upload_timeout" test $((t1 - t0)) -lt 10
ok "SIGTERM in the final wait: the report says so and names what was not pushed" \
    sh -c "grep -q 'SIGTERM: the wait for uploads ended' '$d/run.out' && grep -q 'not pushed: the final adapter' '$d/run.out'"
ok "SIGTERM in the final wait: the job stays staged" sh -c "ls '$d'/run/hub/*-adapter-final/job.json >/dev/null"
faults '{"reset": true}' >/dev/null
stop_server

# --- 401: one clear error, no retries, training unharmed
start_server unauth --unauthorized
train unauth end
expect_eq "401: the run exits 0" 0 "$rc"
ok "401: the message says where the token came from, that it is not valid, and what to do" \
    grep -q "the token from HF_TOKEN is not valid for hub_model_id tester/unauth; create a write token" "$d/run.err"
expect_eq "401: asked once, not retried" 1 "$(requests | grep -c 'repos/create 401')"
ok "401: the token is in no output" no_token_in "$d/run.out" "$d/run.err" "$d/run"
stop_server

# --- 503 twice on the commit, then success: retried with backoff and uploaded; a Retry-After on
# the preupload waited for; the token from the token file huggingface_hub writes (HF_TOKEN unset);
# an adapter directory is staged under $TMPDIR, never in it, and that removed
start_server retry
faults '{"fail": [{"count": 2, "status": 503, "match": "/commit/"},
                  {"count": 1, "status": 503, "match": "/preupload/", "retry_after": 3}]}' >/dev/null
printf '%s\n' "$TOKEN" >"$tmp/tokenfile"
mkdir -p "$d/tmpdir"
env -u HF_TOKEN HF_ENDPOINT="$EP" HF_TOKEN_PATH="$tmp/tokenfile" TMPDIR="$d/tmpdir" "$P" push "$tmp/adapter" \
    --repo tester/retry >"$d/out" 2>"$d/err"
expect_eq "503 then success: ptrain push (token from HF_TOKEN_PATH) exits 0" 0 $?
expect_eq "503 then success: the commit was tried three times" "503 503 200" "$(statuses '"/commit/" in r["path"]')"
ok "Retry-After: 3 on a 503: the next try came at least 3 s later" python3 -c 'import json,sys
p=[r for r in map(json.loads, open(sys.argv[1])) if "/preupload/" in r["path"]]
sys.exit(not (len(p) == 2 and p[1]["t"] - p[0]["t"] >= 2.9))' "$LOG"
ok "ptrain push ADAPTER_DIR: nothing staged in the adapter directory, the temporary one removed" \
    sh -c "[ ! -e '$tmp/adapter/hub' ] && [ -z \"\$(ls -A '$d/tmpdir')\" ]"
readback "503 then success: the adapter reads back" tester/retry "$tmp/adapter" --private

# --- 403 on create for a repository that exists (a token without create rights): looked up, used
faults '{"reset": true, "fail": [{"count": 2, "status": 403, "match": "^POST /api/repos/create"}]}' >/dev/null
printf 'more\n' >"$d/README.md"
cp -r "$tmp/adapter" "$d/adapter2"
cp "$d/README.md" "$d/adapter2/"
FROM=$(log_lines)
env HF_ENDPOINT="$EP" HF_TOKEN="$TOKEN" "$P" push "$d/adapter2" --repo tester/retry >"$d/out403" 2>"$d/err403"
expect_eq "403 on create, the repository exists: ptrain push exits 0" 0 $?
expect_eq "403 on create: then GET /api/models/REPO (200), then the upload" "403 200 200" \
    "$(statuses '"/repos/create" in r["path"] or r["path"] in ("/api/models/tester/retry", "/api/models/tester/retry/commit/main")')"
FROM=0
env HF_ENDPOINT="$EP" HF_TOKEN="$TOKEN" "$P" push "$tmp/adapter" --repo tester/new403 >"$d/out403b" 2>"$d/err403b"
rc=$?
ok "403 on create, no such repository: an error that says the token may not write there" \
    sh -c "[ $rc != 0 ] && grep -q 'may not write to tester/new403' '$d/err403b'"
stop_server

# --- a 5xx and a dropped connection on an LFS PUT during training: both tried again
start_server drop
faults '{"fail": [{"count": 1, "status": 500, "match": "^PUT /_lfs/"}], "drop_put": {"count": 1}}' >/dev/null
train drop end "hub_private: false"
expect_eq "LFS PUT 500 and dropped: the run exits 0" 0 "$rc"
ok "LFS PUT 500 and dropped: every push done" grep -q "every push done" "$d/run.out"
expect_eq "LFS PUT 500 and dropped: 500, cut, then repeated whole" "500 0 200" "$(statuses 'r["method"] == "PUT"')"
mkdir -p "$d/exp"
cp "$d/run/lora/adapter_config.json" "$d/run/lora/adapter_model.safetensors" "$d/exp/"
readback "LFS PUT 500 and dropped: the adapter reads back (public)" tester/drop "$d/exp" --public

# --- commit_message and tags (issue 46): the final adapter's commit has the config's title, its card
# the config's tags after ptrain's own
train msg end "commit_message: Pirate adapter, run 1
tags: [pirate, v1]"
expect_eq "commit_message and tags: the run exits 0" 0 "$rc"
hub_get() { # hub_get PATH: the body of GET $EP/PATH with the token
    TOKEN="$TOKEN" python3 -c 'import os,sys,urllib.request as u
r=u.Request(sys.argv[1], headers={"authorization": "Bearer " + os.environ["TOKEN"]})
sys.stdout.write(u.urlopen(r).read().decode())' "$EP/$1" 2>&1
}
expect_eq "commit_message: the title of the final adapter's commit" "Pirate adapter, run 1" \
    "$(hub_get api/models/tester/msg/commits/main | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["title"])')"
ok "tags: in the card's front matter after ptrain's own" contains "$(hub_get tester/msg/resolve/main/README.md)" \
    "- qlora
- pirate
- v1
"

# --- an error no retry can fix (a protocol other than http/https): one try, one message
t0=$(date +%s)
env HF_ENDPOINT="ftp://127.0.0.1:9" HF_TOKEN="$TOKEN" "$P" push "$tmp/adapter" --repo tester/x >"$d/ftp.out" 2>"$d/ftp.err"
rc=$?
t1=$(date +%s)
ok "HF_ENDPOINT ftp://: refused at once, not retried" \
    sh -c "[ $rc != 0 ] && [ $((t1 - t0)) -lt 5 ] && grep -q 'POST ftp://127.0.0.1:9/api/repos/create failed: ' '$d/ftp.err'"

# --- multipart LFS (the Hub's answer for very large files), offered here for files above 16 KiB
faults '{"reset": true, "multipart": {"threshold": 16384, "chunk": 12000}}' >/dev/null
env HF_ENDPOINT="$EP" HF_TOKEN="$TOKEN" "$P" push "$tmp/adapter" --repo tester/multi >"$d/out" 2>"$d/err"
expect_eq "multipart: ptrain push exits 0" 0 $?
ok "multipart: several part PUTs, then the completion POST" \
    sh -c "[ \$(grep -c '\"PUT\", \"path\": \"/_lfs/' '$LOG') -ge 3 ] && grep -q '\"POST\", \"path\": \"/_lfs/' '$LOG'"
readback "multipart: the adapter reads back" tester/multi "$tmp/adapter" --private
stop_server

# --- an answer past 64 MiB (no Hub answer is that large) is not read on, and the error says so
start_server big
faults '{"fail": [{"count": 1, "status": 400, "match": "^POST /api/repos/create", "pad": 67108864}]}' >/dev/null
env HF_ENDPOINT="$EP" HF_TOKEN="$TOKEN" "$P" push "$tmp/adapter" --repo tester/big >"$d/out" 2>"$d/err"
rc=$?
ok "an answer past 64 MiB: refused with the limit named" \
    sh -c "[ $rc != 0 ] && grep -q 'failed: the answer is larger than 64 MiB, the most ptrain reads of one' '$d/err'"
stop_server

# --- a token in the config file (never used) reaches no checkpoint and no uploaded file, whatever
# its YAML form: a quoted key, flow style nested in an unknown key, a list, a block scalar, an alias
start_server secret
SECRET=hf_configsecret$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')
d=$tmp/secret
mkdir -p "$d"
tiny_config "$d/a.yaml" "$d/a" "max_steps: 3
save_steps: 3
push_to_hub: true
hub_model_id: tester/secret-a
hub_strategy: checkpoint
\"hub_token\": \"$SECRET\"
extra_settings: {hf_token: $SECRET, n: 1}
extra_list:
  - HF_TOKEN: $SECRET"
tiny_config "$d/b.yaml" "$d/b" "max_steps: 3
save_steps: 3
push_to_hub: true
hub_model_id: tester/secret-b
hub_strategy: checkpoint
my_anchor: &tok $SECRET
hf_token: |
  $SECRET
extra: {hub_token: *tok}"
python3 - "$d/a.yaml" "$d/c.yaml" "$SECRET" <<'EOF'
import re, sys
# the config of (a) without its tokens, for (c), the whole file in flow style: {key: value, ...}
lines = [l for l in open(sys.argv[1]) if not re.match(r'("hub_token"|extra_|  - HF_TOKEN)', l)]
text = "".join(lines).replace("/secret/a", "/secret/c").replace("tester/secret-a", "tester/secret-c")
out, ds = [], None
for l in text.splitlines():
    if l.startswith("dataset:"):
        ds = []
    elif ds is not None and l.startswith("  "):
        if l.strip().startswith("- "):
            ds.append([])
        ds[-1].append(l.strip().lstrip("- "))
    elif l.strip():
        out.append(l)
out.append("dataset: [%s]" % ", ".join("{%s}" % ", ".join(e) for e in ds))
out.append("hf_token: " + sys.argv[3])
open(sys.argv[2], "w").write("{" + ",\n ".join(out) + "}\n")
EOF
for v in a b c; do
    run "$d/$v.yaml" "$d/$v.log"
    expect_eq "token in the config ($v): the run exits 0 and pushes" "0 1" "$rc $(grep -c 'every push done' "$d/$v.log.out")"
    ok "token in the config ($v): the checkpoint keeps the settings, the token key as (not stored), not the token" \
        sh -c "h5dump -d /run/config.yaml '$d/$v/checkpoint-3.h5' >'$d/$v.dump' && grep -q 'hub_model_id: tester/secret-$v' '$d/$v.dump' &&
               grep -q 'hub_token: (not stored)' '$d/$v.dump' && ! grep -a -q -F '$SECRET' '$d/$v/checkpoint-3.h5'"
    ok "token in the config ($v): in no file under output_dir, none uploaded, no output" \
        sh -c "! grep -r -a -q -F '$SECRET' '$d/$v' '$SRV/tester/secret-$v' '$d/$v.log.out' '$d/$v.log.err'"
done
stop_server

# --- no token anywhere: training warns once, finishes, and leaves the pushes staged
d=$tmp/notoken
mkdir -p "$d"
tiny_config "$d/c.yaml" "$d/run" "max_steps: 3
push_to_hub: true
hub_model_id: tester/notoken"
env -u HF_TOKEN -u HUGGING_FACE_HUB_TOKEN HF_TOKEN_PATH="$d/none" HF_ENDPOINT=http://127.0.0.1:9 "$P" "$d/c.yaml" \
    >"$d/out" 2>"$d/err"
expect_eq "no token: the run exits 0" 0 $?
ok "no token: the warning says how to give one" grep -q "no Hugging Face token: HF_TOKEN is not set" "$d/err"
ok "no token: the report gives the hf upload command" grep -q "hf upload tester/notoken" "$d/out"

# --- huggingface_save: the merged model, from a Hugging Face base (the tiny Qwen2 with its
# tokenizer), goes to hf_model_name at the end, beside the adapter in hub_model_id
start_server merged
d=$tmp/merged
tiny_config "$d/c.yaml" "$d/run" "max_steps: 2
push_to_hub: true
hub_model_id: tester/merged-lora
hub_strategy: end
huggingface_save: true
hf_model_name: tester/merged"
sed -i "s|^model_name: .*|model_name: \"$PTRAIN_SRCDIR/tests/data/qwen2/hf\"|" "$d/c.yaml"
run "$d/c.yaml" "$d/run"
expect_eq "huggingface_save + push_to_hub: exit 0" 0 "$rc"
ok "the merged directory was written" test -s "$d/run/lora/merged/config.json"
readback "the merged model read back from tester/merged equals final_model_dir/merged" tester/merged "$d/run/lora/merged" \
    --private
ok "the adapter went to tester/merged-lora" test -s "$SRV/tester/merged-lora/files/adapter_model.safetensors"
stop_server

done_testing
