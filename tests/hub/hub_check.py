#!/usr/bin/env python3
"""hub_check.py - the real huggingface_hub client against tests/hub/hub_server.py.

  selftest   starts hub_server.py and drives it with huggingface_hub (create_repo, upload_folder
             with a text file and an 11 MB binary that goes through LFS, snapshot_download,
             hf_hub_download, model_info, a second no-op upload, delete, a paged tree listing,
             Retry-After, a stale parentCommit's 412, a commit whose answer is lost) plus its 401
             cases and every fault, so the stand-in is known to speak the Hub's API as the client
             expects.
  readback   downloads what someone (ptrain) pushed to a Hub endpoint with huggingface_hub and
             compares it byte for byte with a local directory; exits 1 naming each difference.

Run with ~/.cache/ptrain/pyenv/bin/python (huggingface_hub installed). Xet and telemetry are
switched off and HF_HOME points to a temporary directory, so no token or cache of the user's is
read or written and nothing leaves the machine.
"""

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
HF = None  # the huggingface_hub module, imported by setup_env() after HF_ENDPOINT is set


def setup_env(endpoint, home):
    """Environment for huggingface_hub (read at import time), then import it."""
    global HF
    os.environ.update({"HF_ENDPOINT": endpoint, "HF_HUB_DISABLE_XET": "1", "HF_HUB_DISABLE_TELEMETRY": "1",
                       "HF_HUB_DISABLE_IMPLICIT_TOKEN": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1",
                       "HF_HOME": home, "HF_HUB_OFFLINE": "0", "HF_HUB_ETAG_TIMEOUT": "30"})
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_TOKEN_PATH"):
        os.environ.pop(name, None)
    import huggingface_hub
    HF = huggingface_hub
    return HF


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def list_files(top):
    out = []
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = [d for d in dirnames if not (dirpath == top and d == ".cache")]
        out += [os.path.relpath(os.path.join(dirpath, f), top).replace(os.sep, "/") for f in filenames]
    return sorted(out)


def compare_dirs(expect, got, exact=False):
    """Differences between two directory trees, as lines; [] when every expected file matches."""
    problems = []
    have = set(list_files(got)) if os.path.isdir(got) else set()
    for rel in list_files(expect):
        e, g = os.path.join(expect, rel), os.path.join(got, rel)
        if rel not in have:
            problems.append("MISSING %s (not in the repo)" % rel)
        elif sha256_file(e) != sha256_file(g):
            problems.append("DIFFERS %s (local %d bytes sha256 %s, repo %d bytes sha256 %s)"
                            % (rel, os.path.getsize(e), sha256_file(e)[:12], os.path.getsize(g), sha256_file(g)[:12]))
    if exact:
        extra = have - set(list_files(expect)) - {".gitattributes"}
        problems += ["EXTRA %s (in the repo, not in %s)" % (rel, expect) for rel in sorted(extra)]
    return problems


# ---------------------------------------------------------------------------------------------
# readback
# ---------------------------------------------------------------------------------------------

def readback(args):
    tmp = tempfile.mkdtemp(prefix="hub_readback.")
    try:
        return readback_in(args, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def readback_in(args, tmp):
    setup_env(args.endpoint.rstrip("/"), os.path.join(tmp, "hf_home"))
    api = HF.HfApi(endpoint=args.endpoint.rstrip("/"), token=args.token)
    problems = visibility_problems(api, args)
    prefix = (args.path_in_repo or "").strip("/")
    dest = os.path.join(tmp, "snapshot")
    HF.snapshot_download(args.repo, revision=args.revision, token=args.token, local_dir=dest,
                         allow_patterns=[prefix + "/*"] if prefix else None, endpoint=args.endpoint.rstrip("/"))
    got = os.path.join(dest, prefix) if prefix else dest
    problems += compare_dirs(args.expect, got, exact=args.exact)
    for line in problems:
        print(line)
    if problems:
        print("readback FAILED: %d problem(s) in %s%s" % (len(problems), args.repo, "/" + prefix if prefix else ""))
        return 1
    print("readback ok: %d file(s) of %s match %s%s" % (len(list_files(args.expect)), args.expect, args.repo,
                                                        "/" + prefix if prefix else ""))
    return 0


def visibility_problems(api, args):
    if not (args.private or args.public):
        return []
    info = api.model_info(args.repo, revision=args.revision)
    if args.private and info.private is not True:
        return ["VISIBILITY %s is public, expected private" % args.repo]
    if args.public and info.private is not False:
        return ["VISIBILITY %s is private, expected public" % args.repo]
    if args.private:
        try:
            HF.HfApi(endpoint=args.endpoint.rstrip("/"), token=False).model_info(args.repo)
            return ["VISIBILITY %s is readable without a token" % args.repo]
        except HF.errors.RepositoryNotFoundError:
            pass
    return []


# ---------------------------------------------------------------------------------------------
# selftest
# ---------------------------------------------------------------------------------------------

class Report:
    """TAP-style 'ok N - name' lines; remembers failures."""

    def __init__(self):
        self.n, self.failed = 0, []

    def check(self, name, cond, detail=""):
        self.n += 1
        print("%s %d - %s%s" % ("ok" if cond else "not ok", self.n, name, "" if cond else "  # " + str(detail)),
              flush=True)
        if not cond:
            self.failed.append(name)
        return cond


class Server:
    """hub_server.py as a child process (the interpreter running this script), on a free port."""

    def __init__(self, tmp, token, python=None):
        self.root, self.log = os.path.join(tmp, "root"), os.path.join(tmp, "requests.jsonl")
        port_file = os.path.join(tmp, "port")
        self.proc = subprocess.Popen([python or sys.executable, os.path.join(HERE, "hub_server.py"), "--root", self.root,
                                      "--token", token, "--log", self.log, "--port-file", port_file,
                                      "--user", "tester"], stdout=subprocess.DEVNULL)
        for _ in range(200):
            if os.path.exists(port_file):
                break
            time.sleep(0.05)
        with open(port_file) as f:
            self.url = "http://127.0.0.1:%d" % int(f.read())

    def faults(self, spec):
        req = urllib.request.Request(self.url + "/_test/faults", data=json.dumps(spec).encode(), method="POST")
        with urllib.request.urlopen(req) as r:
            return json.load(r)

    def release(self):
        urllib.request.urlopen(urllib.request.Request(self.url + "/_test/release", data=b"", method="POST")).read()

    def records(self):
        with open(self.log) as f:
            return [json.loads(line) for line in f]

    def stop(self):
        self.proc.terminate()
        return self.proc.wait(10)


def make_folder(top):
    os.makedirs(os.path.join(top, "sub"))
    files = {"README.md": b"---\nlicense: apache-2.0\n---\n# selftest\n\nA model card.\n",
             "adapter_config.json": b'{"r": 8, "lora_alpha": 16}\n',
             "sub/notes.txt": "caf\u00e9 and UTF-8 text\n".encode(),
             "weights.bin": os.urandom(11 * 1024 * 1024),
             "tiny.safetensors": b"\x08\x00\x00\x00\x00\x00\x00\x00{}      "}
    for rel, data in files.items():
        with open(os.path.join(top, rel), "wb") as f:
            f.write(data)
    return files


def commits_in(records, since=0):
    return [r for r in records[since:] if r["method"] == "POST" and "/commit/" in r["path"]]


def selftest_upload(rep, srv, api, repo, src):
    url = api.create_repo(repo, private=True)
    rep.check("create_repo private returns the repo url", str(url).endswith("/" + repo), url)
    try:
        api.create_repo(repo, private=True)
        rep.check("create_repo again is a 409", False, "no error")
    except HF.errors.HfHubHTTPError as e:
        rep.check("create_repo again is a 409", e.response.status_code == 409, e)
    rep.check("create_repo exist_ok=True passes", api.create_repo(repo, exist_ok=True) is not None)
    info = api.upload_folder(repo_id=repo, folder_path=src, commit_message="upload")
    rep.check("upload_folder returns a commit oid", len(info.oid) == 40, info)
    recs = srv.records()
    commit = commits_in(recs)[-1]["commit"]
    kinds = {line["value"]["path"]: line["key"] for line in commit[1:]}
    rep.check("weights.bin and tiny.safetensors went as lfsFile, text as file",
              kinds == {"weights.bin": "lfsFile", "tiny.safetensors": "lfsFile", "README.md": "file",
                        "adapter_config.json": "file", "sub/notes.txt": "file"}, kinds)
    puts = [r for r in recs if r["method"] == "PUT"]
    rep.check("two LFS PUTs, 200, no Authorization header on them",
              len(puts) == 2 and all(r["status"] == 200 and "authorization" not in r["headers"] for r in puts),
              puts)
    return info


def selftest_download(rep, srv, api, repo, src, tmp):
    dest = HF.snapshot_download(repo, local_dir=os.path.join(tmp, "dl"), token=api.token)
    rep.check("snapshot_download gets every file byte-identical", compare_dirs(src, dest, exact=True) == [],
              compare_dirs(src, dest, exact=True))
    rep.check("files/ on the server disk match too",
              compare_dirs(src, os.path.join(srv.root, *repo.split("/"), "files"), exact=True) == [])
    path = HF.hf_hub_download(repo, "weights.bin", cache_dir=os.path.join(tmp, "cache"), token=api.token)
    rep.check("hf_hub_download (cache dir) of the LFS file", sha256_file(path) == sha256_file(
        os.path.join(src, "weights.bin")))
    info = api.model_info(repo, files_metadata=True)
    lfs = {s.rfilename: s.lfs is not None for s in info.siblings}
    rep.check("model_info: private, sha, siblings with lfs info",
              info.private is True and len(info.sha) == 40 and lfs.get("weights.bin") and not lfs.get("README.md"),
              info)
    files = api.list_repo_files(repo)
    rep.check("list_repo_files", sorted(files) == sorted(list_files(src) + [".gitattributes"]), files)


def selftest_update(rep, srv, api, repo, src):
    n = len(srv.records())
    api.upload_folder(repo_id=repo, folder_path=src, commit_message="same again")
    rep.check("uploading unchanged files makes no commit (preupload oids match)", commits_in(srv.records(), n) == [],
              commits_in(srv.records(), n))
    with open(os.path.join(src, "README.md"), "ab") as f:
        f.write(b"\nMore.\n")
    os.unlink(os.path.join(src, "sub", "notes.txt"))
    ops = [HF.CommitOperationAdd("README.md", os.path.join(src, "README.md")),
           HF.CommitOperationDelete("sub/notes.txt")]
    api.create_commit(repo, ops, commit_message="edit and delete")
    rep.check("create_commit add + delete, then readback matches", readback_ok(api, repo, src))


def readback_ok(api, repo, src, prefix=None):
    with tempfile.TemporaryDirectory() as d:
        HF.snapshot_download(repo, local_dir=d, token=api.token)
        return compare_dirs(src, d, exact=True) == []


def selftest_auth(rep, srv, endpoint, token, repo):
    bad = HF.HfApi(endpoint=endpoint, token="hf_wrong")
    for name, call in [("create_repo", lambda: bad.create_repo("tester/other")),
                       ("upload_file", lambda: bad.upload_file(path_or_fileobj=b"x", path_in_repo="x", repo_id=repo))]:
        try:
            call()
            rep.check("wrong token: %s is a 401" % name, False, "no error")
        except HF.errors.HfHubHTTPError as e:
            rep.check("wrong token: %s is a 401" % name, e.response.status_code == 401, e)
    try:
        HF.HfApi(endpoint=endpoint, token=False).model_info(repo)
        rep.check("no token: private repo is not found", False, "readable")
    except HF.errors.RepositoryNotFoundError as e:
        rep.check("no token: private repo is not found", e.response.status_code == 401, e)
    srv.faults({"unauthorized": True})
    try:
        HF.HfApi(endpoint=endpoint, token=token).model_info(repo)
        rep.check("fault unauthorized: even the right token gets 401", False, "no error")
    except HF.errors.HfHubHTTPError as e:
        rep.check("fault unauthorized: even the right token gets 401", e.response.status_code == 401, e)
    srv.faults({"reset": True})


def selftest_retries(rep, srv, api, repo):
    srv.faults({"fail": [{"count": 2, "status": 503, "match": "^POST /api/models/.*/preupload/"}]})
    n = len(srv.records())
    api.upload_file(path_or_fileobj=b"retry me\n", path_in_repo="retry.txt", repo_id=repo)
    statuses = [r["status"] for r in srv.records()[n:] if "/preupload/" in r["path"]]
    rep.check("2x 503 on preupload, the client retries and succeeds", statuses == [503, 503, 200], statuses)
    srv.faults({"fail": [], "drop_put": {"count": 1}})
    n, blob = len(srv.records()), os.urandom(3 * 1024 * 1024)
    api.upload_file(path_or_fileobj=blob, path_in_repo="dropped.bin", repo_id=repo)
    puts = [(r["status"], r.get("fault")) for r in srv.records()[n:] if r["method"] == "PUT"]
    rep.check("PUT dropped mid-body, the client retries and succeeds", puts == [(0, "drop_put"), (200, None)], puts)
    srv.faults({"reset": True})


def selftest_hub_rules(rep, srv, api, repo):
    """The stand-in's paging, Retry-After, parentCommit and lost answers, as huggingface_hub meets them."""
    whole = sorted(api.list_repo_files(repo))
    srv.faults({"tree_page": 1})
    n = len(srv.records())
    paged = sorted(api.list_repo_files(repo))
    pages = [r for r in srv.records()[n:] if "/tree/" in r["path"]]
    rep.check("tree listing in pages (Link: rel=next) lists the same files", paged == whole and len(pages) >= 2,
              (len(pages), paged))
    srv.faults({"tree_page": 0, "fail": [{"count": 1, "status": 503, "match": "/preupload/", "retry_after": 2}]})
    n = len(srv.records())
    api.upload_file(path_or_fileobj=b"after\n", path_in_repo="after.txt", repo_id=repo)
    pre = [r for r in srv.records()[n:] if "/preupload/" in r["path"]]
    rep.check("503 with Retry-After: 2, the client waits at least 2 s", len(pre) == 2 and pre[1]["t"] - pre[0]["t"] >= 2,
              [(r["status"], r["t"]) for r in pre])
    old = api.model_info(repo).sha
    api.upload_file(path_or_fileobj=b"moved\n", path_in_repo="moved.txt", repo_id=repo)
    try:
        api.create_commit(repo, [HF.CommitOperationAdd("stale.txt", b"x\n")], commit_message="stale",
                          parent_commit=old)
        rep.check("a commit on a stale parentCommit is a 412", False, "accepted")
    except HF.errors.HfHubHTTPError as e:
        rep.check("a commit on a stale parentCommit is a 412", e.response.status_code == 412, e)
    srv.faults({"fail": [], "lose_answer": [{"count": 1, "match": "/commit/"}]})
    try:
        api.upload_file(path_or_fileobj=b"lost\n", path_in_repo="lost.txt", repo_id=repo)
        rep.check("lose_answer: the commit is applied, its answer never arrives", False, "answered")
    except Exception:  # noqa: BLE001 - whatever the transport raises
        rep.check("lose_answer: the commit is applied, its answer never arrives",
                  "lost.txt" in api.list_repo_files(repo))
    srv.faults({"reset": True})


def selftest_multipart(rep, srv, api, repo):
    srv.faults({"multipart": {"threshold": 6 * 1024 * 1024, "chunk": 4 * 1024 * 1024}})
    n, blob = len(srv.records()), os.urandom(9 * 1024 * 1024 + 17)
    api.upload_file(path_or_fileobj=blob, path_in_repo="multi.bin", repo_id=repo)
    reqs = [(r["method"], r["path"].rsplit("/", 2)[-2:], r["status"]) for r in srv.records()[n:] if "/_lfs/" in r["path"]]
    rep.check("multipart LFS upload: 3 part PUTs then the completion POST", [m for m, _, _ in reqs] ==
              ["PUT", "PUT", "PUT", "POST"] and all(s == 200 for _, _, s in reqs), reqs)
    with tempfile.TemporaryDirectory() as d:
        path = HF.hf_hub_download(repo, "multi.bin", local_dir=d, token=api.token)
        with open(path, "rb") as f:
            rep.check("multipart upload reads back byte-identical", f.read() == blob)
    srv.faults({"multipart": None})


def selftest_faults(rep, srv, api, repo):
    selftest_hold(rep, srv, api, repo)
    srv.faults({"slow": 0.4})
    t0 = time.monotonic()
    api.model_info(repo)
    rep.check("slow 0.4 s delays an answer", time.monotonic() - t0 >= 0.4)
    srv.faults({"slow": 0, "down": True})
    try:
        api.model_info(repo)
        rep.check("down: connections closed without an answer", False, "answered")
    except Exception as e:  # httpx2 RemoteProtocolError after the client's own retries
        rep.check("down: connections closed without an answer", "disconnect" in str(e).lower() or
                  "closed" in str(e).lower(), repr(e))
    srv.faults({"reset": True})


def selftest_hold(rep, srv, api, repo):
    srv.faults({"hold": True})
    done = threading.Event()
    threading.Thread(target=lambda: (api.model_info(repo), done.set()), daemon=True).start()
    time.sleep(0.6)
    held = not done.is_set() and srv.faults({})["held_now"] == 1
    srv.release()
    rep.check("hold blocks a request until /_test/release", held and done.wait(10))


def selftest_log(rep, srv, token):
    with open(srv.log) as f:
        text = f.read()
    rep.check("the token never appears in the request log", token not in text)
    writes = [r for r in srv.records() if r["method"] == "POST" and r["path"].startswith("/api/models/")]
    rep.check("every API write carried a redacted Bearer token",
              all(r["headers"].get("authorization") == "Bearer <REDACTED>" for r in writes))


def selftest(args):
    tmp = tempfile.mkdtemp(prefix="hub_selftest.")
    token = "hf_selftest_" + os.urandom(8).hex()
    srv = Server(tmp, token, args.server_python)
    rep = Report()
    try:
        setup_env(srv.url, os.path.join(tmp, "hf_home"))
        api = HF.HfApi(endpoint=srv.url, token=token)
        repo, src = "tester/selftest", os.path.join(tmp, "src")
        make_folder(src)
        selftest_upload(rep, srv, api, repo, src)
        selftest_download(rep, srv, api, repo, src, tmp)
        selftest_update(rep, srv, api, repo, src)
        selftest_auth(rep, srv, srv.url, token, repo)
        selftest_retries(rep, srv, api, repo)
        selftest_hub_rules(rep, srv, api, repo)
        selftest_multipart(rep, srv, api, repo)
        selftest_faults(rep, srv, api, repo)
        selftest_log(rep, srv, token)
    finally:
        rep.check("server exits 0 on SIGTERM", srv.stop() == 0)
    print("1..%d" % rep.n)
    if rep.failed:
        print("selftest FAILED (%d): %s; files kept in %s" % (len(rep.failed), ", ".join(rep.failed), tmp))
        return 1
    print("selftest ok (%d checks, huggingface_hub %s)" % (rep.n, HF.__version__))
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("selftest", help="check hub_server.py against huggingface_hub")
    s.add_argument("--server-python", help="interpreter for hub_server.py (default: this one)")
    r = sub.add_parser("readback", help="download a pushed repo and compare it with a local directory")
    r.add_argument("--endpoint", required=True)
    r.add_argument("--token", required=True)
    r.add_argument("--repo", required=True)
    r.add_argument("--expect", required=True, help="local directory the repo (or --path-in-repo) must match")
    r.add_argument("--path-in-repo", help="compare this folder of the repo instead of its root")
    r.add_argument("--revision", default="main")
    vis = r.add_mutually_exclusive_group()
    vis.add_argument("--private", action="store_true", help="the repo must be private (and unreadable without token)")
    vis.add_argument("--public", action="store_true", help="the repo must be public")
    r.add_argument("--exact", action="store_true", help="also fail on repo files not in --expect (.gitattributes aside)")
    args = p.parse_args()
    try:
        return selftest(args) if args.cmd == "selftest" else readback(args)
    except Exception as e:  # a client error (404, connection refused, ...): say what, exit 2
        print("hub_check %s: error: %s: %s" % (args.cmd, type(e).__name__, e), file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
