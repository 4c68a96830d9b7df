#!/usr/bin/env python3
"""hub_server.py - a local stand-in for the Hugging Face Hub, for tests that must not touch the internet.

It implements the part of the Hub's HTTP API that huggingface_hub (and ptrain's libcurl client, which
speaks it the same way) uses to create a model repo, upload files (inline in an NDJSON commit, or
through the git-LFS batch API with a basic-transfer PUT to a pre-signed URL) and read them back
(model_info, the tree listing, HEAD/GET .../resolve/...). Repos live on disk under --root, the main
branch checked out in ROOT/NS/NAME/files/ so a test can compare files directly. Every request is
written to a JSON-lines log (--log) with the token redacted from the Authorization header only, so
a grep of the log for the token finds any other leak. Faults (down, 401, N x 5xx with an optional
Retry-After, a dropped LFS PUT, an answer lost after the request was applied, slowness, a hold until
released) and the tree listing's page size are set on the command line or mid-test with POST
/_test/faults.
Python 3 standard library only. Run with --help for the options.
"""

import argparse
import base64
import datetime
import fnmatch
import hashlib
import hmac
import json
import os
import re
import secrets
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LFS_THRESHOLD = 10 * 1024 * 1024  # the Hub rejects regular (non-LFS) files above 10 MiB
LFS_POINTER = "version https://git-lfs.github.com/spec/v1\noid sha256:{oid}\nsize {size}\n"
# the .gitattributes the Hub puts in the initial commit of every new model repo (abridged)
GITATTRIBUTES_PATTERNS = [
    "*.7z", "*.arrow", "*.bin", "*.bz2", "*.ckpt", "*.ftz", "*.gz", "*.h5", "*.joblib", "*.lfs.*",
    "*.mlmodel", "*.model", "*.msgpack", "*.npy", "*.npz", "*.onnx", "*.ot", "*.parquet", "*.pb",
    "*.pickle", "*.pkl", "*.pt", "*.pth", "*.rar", "*.safetensors", "saved_model/**/*", "*.tar.*",
    "*.tar", "*.tflite", "*.tgz", "*.wasm", "*.xz", "*.zip", "*.zst", "*tfevents*", "*.gguf",
]
GITATTRIBUTES = "".join(p + " filter=lfs diff=lfs merge=lfs -text\n" for p in GITATTRIBUTES_PATTERNS)
LOGGED_HEADERS = ("authorization", "content-type", "content-length", "transfer-encoding", "accept",
                  "user-agent", "expect", "range", "accept-encoding", "x-request-id")
CONTROL_PREFIX = "/_test/"


class HubError(Exception):
    """An error answered the Hub's way: status, {"error": message} and X-Error-Code/-Message."""

    def __init__(self, status, message, code=None, headers=None):
        super().__init__(message)
        self.status, self.message, self.code = status, message, code
        self.headers = headers or {}


class Dropped(Exception):
    """The handler has chosen to close the connection without an answer (fault injection)."""


def now_iso():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def git_blob_sha1(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def lfs_pointer(oid, size):
    return LFS_POINTER.format(oid=oid, size=size).encode()


def looks_binary(sample):
    """The Hub's test on the first 512 bytes: a NUL byte or text that is not UTF-8."""
    if b"\0" in sample:
        return True
    for cut in range(4):  # the sample may end inside a multi-byte character
        try:
            sample[:len(sample) - cut].decode("utf-8")
            return False
        except UnicodeDecodeError:
            continue
    return True


def matches_gitattributes_lfs(path):
    name = path.rsplit("/", 1)[-1]
    return any(fnmatch.fnmatch(name, p) or fnmatch.fnmatch(path, p) for p in GITATTRIBUTES_PATTERNS)


def write_atomic(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


# ---------------------------------------------------------------------------------------------
# Repository storage: ROOT/NS/NAME/{repo.json, commits/OID.json, objects/SHA1, lfs/SHA256, files/}
# ---------------------------------------------------------------------------------------------

class Repo:
    """One model repo: metadata, commits (each a full file table) and the blobs they point to."""

    def __init__(self, root, repo_id, meta):
        self.id, self.meta = repo_id, meta
        self.dir = os.path.join(root, *repo_id.split("/"))

    def path(self, *parts):
        return os.path.join(self.dir, *parts)

    def save_meta(self):
        write_atomic(self.path("repo.json"), json.dumps(self.meta, indent=1).encode())

    def commit(self, oid):
        with open(self.path("commits", oid + ".json")) as f:
            return json.load(f)

    def resolve(self, rev):
        """A branch name or a full commit oid -> the commit dict, or None."""
        if rev in self.meta["branches"]:
            return self.commit(self.meta["branches"][rev])
        if re.fullmatch(r"[0-9a-f]{40}", rev) and rev in self.meta["commits"]:
            return self.commit(rev)
        return None

    def has_lfs(self, oid):
        return os.path.isfile(self.path("lfs", oid))

    def read_file(self, entry):
        """Bytes of a file-table entry (regular: objects/, LFS: lfs/)."""
        where = ("lfs", entry["lfs"]) if entry.get("lfs") else ("objects", entry["blob"])
        with open(self.path(*where), "rb") as f:
            return f.read()

    def file_location(self, entry):
        return self.path("lfs", entry["lfs"]) if entry.get("lfs") else self.path("objects", entry["blob"])


class Store:
    """All repos under --root, guarded by one lock (the server is threaded)."""

    def __init__(self, root, user):
        self.root, self.user = root, user
        self.lock = threading.RLock()
        self.repos = {}
        os.makedirs(root, exist_ok=True)
        self.load()

    def load(self):
        for ns in sorted(os.listdir(self.root)):
            nsdir = os.path.join(self.root, ns)
            if not os.path.isdir(nsdir) or ns.startswith((".", "_")):
                continue
            for name in sorted(os.listdir(nsdir)):
                meta_path = os.path.join(nsdir, name, "repo.json")
                if os.path.isfile(meta_path):
                    with open(meta_path) as f:
                        self.repos[ns + "/" + name] = Repo(self.root, ns + "/" + name, json.load(f))

    def get(self, repo_id):
        return self.repos.get(repo_id)

    def create(self, repo_id, private):
        repo = Repo(self.root, repo_id, {"id": repo_id, "private": private, "createdAt": now_iso(),
                                         "branches": {}, "commits": []})
        for sub in ("commits", "objects", "lfs", "files"):
            os.makedirs(repo.path(sub), exist_ok=True)
        self.repos[repo_id] = repo
        ops = [{"key": "file", "value": {"path": ".gitattributes", "encoding": "base64",
                                         "content": base64.b64encode(GITATTRIBUTES.encode()).decode()}}]
        self.apply_commit(repo, "main", {"summary": "initial commit", "description": ""}, ops, new_branch=True)
        return repo

    def delete(self, repo_id):
        repo = self.repos.pop(repo_id)
        shutil.rmtree(repo.dir, ignore_errors=True)

    def apply_commit(self, repo, branch, header, ops, new_branch=False):
        """Validate and apply NDJSON operations on top of BRANCH; returns the new commit oid."""
        parent = repo.meta["branches"].get(branch)
        if parent is None and not new_branch:
            raise HubError(404, "Invalid rev id: " + branch, "RevisionNotFound")
        if header.get("parentCommit") and header["parentCommit"] != parent:
            raise HubError(412, "A commit has happened since. Please refresh and try again.")
        files = dict(repo.commit(parent)["files"]) if parent else {}
        for op in ops:
            self.apply_op(repo, files, op)
        date = now_iso()
        oid = hashlib.sha1(json.dumps([parent, files, header, date, len(repo.meta["commits"])],
                                      sort_keys=True).encode()).hexdigest()
        commit = {"oid": oid, "parent": parent, "summary": header.get("summary", ""),
                  "description": header.get("description", ""), "date": date, "files": files}
        write_atomic(repo.path("commits", oid + ".json"), json.dumps(commit, indent=1).encode())
        repo.meta["branches"][branch] = oid
        repo.meta["commits"].append(oid)
        repo.meta["lastModified"] = date
        repo.save_meta()
        if branch == "main":
            self.checkout(repo, files)
        return oid

    def apply_op(self, repo, files, op):
        key, value = op.get("key"), op.get("value")
        if not isinstance(value, dict) or not isinstance(value.get("path"), str) or not value["path"]:
            raise HubError(400, "Invalid commit operation: missing value.path")
        path = value["path"].strip("/")
        if key == "file":
            files[path] = self.store_regular(repo, path, value)
        elif key == "lfsFile":
            files[path] = self.check_lfs(repo, path, value)
        elif key == "deletedFile":
            if path not in files:
                raise HubError(404, "A file with this name doesn't exist: " + path, "EntryNotFound")
            del files[path]
        elif key == "deletedFolder":
            for p in [p for p in files if p.startswith(path + "/")]:
                del files[p]
        else:
            raise HubError(400, "Invalid commit operation key: %r" % (key,))

    def store_regular(self, repo, path, value):
        data = decode_content(value)
        if len(data) > LFS_THRESHOLD:
            raise HubError(400, "Your push was rejected because it contains files larger than 10 MiB. "
                                "Please use https://git-lfs.github.com/ to store large files. (" + path + ")")
        if looks_binary(data[:512]):
            raise HubError(400, "Your push was rejected because it contains binary files. Please use "
                                "https://huggingface.co/docs/hub/xet to store binary files. (" + path + ")")
        blob = git_blob_sha1(data)
        if not os.path.exists(repo.path("objects", blob)):
            write_atomic(repo.path("objects", blob), data)
        return {"size": len(data), "blob": blob, "lfs": None}

    def check_lfs(self, repo, path, value):
        oid, algo = value.get("oid"), value.get("algo", "sha256")
        if algo != "sha256" or not isinstance(oid, str) or not re.fullmatch(r"[0-9a-f]{64}", oid):
            raise HubError(400, "Invalid lfsFile for %s: algo must be sha256 and oid 64 hex digits" % path)
        if not repo.has_lfs(oid):
            raise HubError(400, "Your push was rejected because an LFS pointer pointed to a file that does "
                                "not exist. (%s, oid %s)" % (path, oid))
        size = os.path.getsize(repo.path("lfs", oid))
        if value.get("size") is not None and value["size"] != size:
            raise HubError(400, "lfsFile %s: size %r does not match the stored object (%d)"
                           % (path, value["size"], size))
        return {"size": size, "blob": git_blob_sha1(lfs_pointer(oid, size)), "lfs": oid}

    def checkout(self, repo, files):
        """Rewrite ROOT/NS/NAME/files/ to hold exactly the files of the new main commit."""
        tmp = repo.path(".files-new")
        shutil.rmtree(tmp, ignore_errors=True)
        for path, entry in files.items():
            dest = os.path.join(tmp, *path.split("/"))
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            shutil.copyfile(repo.file_location(entry), dest)
        os.makedirs(tmp, exist_ok=True)
        old = repo.path(".files-old")
        shutil.rmtree(old, ignore_errors=True)
        if os.path.exists(repo.path("files")):
            os.replace(repo.path("files"), old)
        os.replace(tmp, repo.path("files"))
        shutil.rmtree(old, ignore_errors=True)


def decode_content(value):
    content = value.get("content")
    if not isinstance(content, str):
        raise HubError(400, "Invalid file operation for %s: missing content" % value.get("path"))
    encoding = value.get("encoding", "utf-8")
    if encoding == "base64":
        try:
            return base64.b64decode(content, validate=True)
        except ValueError:
            raise HubError(400, "Invalid base64 content for " + value["path"])
    if encoding in ("utf-8", "utf8"):
        return content.encode()
    raise HubError(400, "Invalid encoding %r for %s" % (encoding, value["path"]))


# ---------------------------------------------------------------------------------------------
# Faults
# ---------------------------------------------------------------------------------------------

class Faults:
    """The fault state; changed by the command line, POST /_test/faults and /_test/release."""

    def __init__(self):
        self.cond = threading.Condition()
        self.reset()

    def reset(self):
        self.down = False
        self.unauthorized = False
        self.fail = []          # [{"match": regex, "status": int, "count": remaining, "hits": served}]
        self.drop_put = {"count": 0, "after": None, "hits": 0}
        self.slow = 0.0
        self.hold = False
        self.hold_file = None
        self.held_now = 0
        self.multipart = None   # {"threshold": BYTES, "chunk": BYTES}: offer HF multipart LFS uploads
        self.lose_answer = []   # [{"match": regex, "count": remaining, "hits": served}]: apply, then close unanswered
        self.tree_page = 0      # > 0: the tree listing answers pages of this many entries, Link: rel="next"

    def update(self, spec):
        """Merge a JSON fault spec (see the notes); unknown keys are an error."""
        known = {"down", "unauthorized", "fail", "drop_put", "slow", "hold", "hold_file", "reset", "multipart",
                 "lose_answer", "tree_page"}
        bad = set(spec) - known
        if bad:
            raise ValueError("unknown fault keys: " + ", ".join(sorted(bad)))
        with self.cond:
            if spec.get("reset"):
                self.reset()
            for key in ("down", "unauthorized", "hold"):
                if key in spec:
                    setattr(self, key, bool(spec[key]))
            if "slow" in spec:
                self.slow = float(spec["slow"])
            if "hold_file" in spec:
                self.hold_file = spec["hold_file"]
                self.hold = self.hold or bool(self.hold_file)
            if "fail" in spec:
                self.fail = [parse_fail_rule(r) for r in spec["fail"]]
            if "drop_put" in spec:
                self.drop_put = parse_drop_rule(spec["drop_put"])
            if "lose_answer" in spec:
                self.lose_answer = [parse_fail_rule(r) for r in spec["lose_answer"]]
            if "tree_page" in spec:
                self.tree_page = int(spec["tree_page"] or 0)
            if "multipart" in spec:
                m = spec["multipart"]
                self.multipart = None if not m else {"threshold": int(m["threshold"]),
                                                     "chunk": int(m.get("chunk", 5 * 1024 * 1024))}
            self.cond.notify_all()

    def release(self):
        with self.cond:
            self.hold, self.hold_file = False, None
            self.cond.notify_all()

    def wait_hold(self):
        """Block while hold is on and its file (if any) does not exist. Returns seconds waited."""
        start = time.monotonic()
        with self.cond:
            self.held_now += 1
            try:
                while self.hold and not (self.hold_file and os.path.exists(self.hold_file)):
                    self.cond.wait(0.05)
            finally:
                self.held_now -= 1
        return time.monotonic() - start

    def take_fail(self, method, path, rules=None):
        """The first fail rule matching 'METHOD /path' with count left (now spent once), or None."""
        with self.cond:
            for rule in self.fail if rules is None else rules:
                if rule["count"] > 0 and re.search(rule["match"], method + " " + path):
                    rule["count"] -= 1
                    rule["hits"] += 1
                    return rule
        return None

    def take_lose(self, method, path):
        return self.take_fail(method, path, self.lose_answer) is not None

    def take_drop(self):
        with self.cond:
            if self.drop_put["count"] > 0:
                self.drop_put["count"] -= 1
                self.drop_put["hits"] += 1
                return True
        return False

    def snapshot(self):
        with self.cond:
            return json.loads(json.dumps({
                "down": self.down, "unauthorized": self.unauthorized, "fail": self.fail,
                "drop_put": self.drop_put, "slow": self.slow, "hold": self.hold,
                "hold_file": self.hold_file, "held_now": self.held_now, "multipart": self.multipart,
                "lose_answer": self.lose_answer, "tree_page": self.tree_page}))


def parse_fail_rule(rule):
    """{"count": N, "status": 503, "match": regex, "retry_after": S, "pad": BYTES} or the CLI form
    "N:STATUS[:REGEX]". retry_after (optional): the answer carries Retry-After: S, as the Hub (or its CDN)
    does on 429/503. pad (optional): the answer's body carries that many more bytes."""
    if isinstance(rule, str):
        parts = rule.split(":", 2)
        rule = {"count": parts[0], "status": parts[1] if len(parts) > 1 else 503,
                "match": parts[2] if len(parts) > 2 else ""}
    out = {"count": int(rule.get("count", 1)), "status": int(rule.get("status", 503)),
           "match": str(rule.get("match", "")), "hits": 0, "pad": int(rule.get("pad", 0))}
    if rule.get("retry_after") is not None:
        out["retry_after"] = int(rule["retry_after"])
    re.compile(out["match"])
    return out


def parse_drop_rule(rule):
    """{"count": N, "after": BYTES} or the CLI form "N[:BYTES]"; after defaults to half the body."""
    if isinstance(rule, (int, str)):
        parts = str(rule).split(":", 1)
        rule = {"count": parts[0], "after": parts[1] if len(parts) > 1 else None}
    after = rule.get("after")
    return {"count": int(rule.get("count", 1)), "after": int(after) if after is not None else None, "hits": 0}


# ---------------------------------------------------------------------------------------------
# Request log
# ---------------------------------------------------------------------------------------------

class RequestLog:
    def __init__(self, path):
        self.path, self.lock, self.seq = path, threading.Lock(), 0
        if path:
            open(path, "a").close()

    def write(self, record):
        with self.lock:
            self.seq += 1
            record = dict(seq=self.seq, **record)
            if self.path:
                with open(self.path, "a") as f:
                    f.write(json.dumps(record, sort_keys=True) + "\n")


def summarize_commit(ops):
    """The NDJSON lines of a commit for the log, file contents replaced by their size and sha256."""
    out = []
    for op in ops:
        value = op.get("value")
        if op.get("key") == "file" and isinstance(value, dict) and isinstance(value.get("content"), str):
            value = dict(value)
            try:
                data = decode_content(value)
                value["content_size"], value["content_sha256"] = len(data), hashlib.sha256(data).hexdigest()
            except HubError:
                value["content_size"] = None
            del value["content"]
        out.append({"key": op.get("key"), "value": value})
    return out


# ---------------------------------------------------------------------------------------------
# HTTP handler
# ---------------------------------------------------------------------------------------------

REPO = r"(?P<repo>[\w.-]+/[\w.-]+)"
ROUTES = [  # (method(s), regex on the unquoted path, handler method name)
    ("POST", r"/api/repos/create", "api_create"),
    ("POST", r"/api/repos/delete", "api_delete"),
    ("GET", r"/api/whoami-v2", "api_whoami"),
    ("POST", r"/api/validate-yaml", "api_validate_yaml"),
    ("GET", r"/api/agent-harnesses", "api_agent_harnesses"),
    ("GET", r"/api/models/" + REPO + r"(?:/revision/(?P<rev>[^/]+))?", "api_model_info"),
    ("POST", r"/api/models/" + REPO + r"/preupload/(?P<rev>[^/]+)", "api_preupload"),
    ("POST", r"/api/models/" + REPO + r"/commit/(?P<rev>[^/]+)", "api_commit"),
    ("GET", r"/api/models/" + REPO + r"/tree/(?P<rev>[^/]+)(?:/(?P<path>.+))?", "api_tree"),
    ("GET", r"/api/models/" + REPO + r"/refs", "api_refs"),
    ("GET", r"/api/models/" + REPO + r"/commits/(?P<rev>[^/]+)", "api_commits"),
    ("POST", r"/" + REPO + r"\.git/info/lfs/objects/batch", "lfs_batch"),
    ("POST", r"/" + REPO + r"\.git/info/lfs/objects/verify", "lfs_verify"),
    ("PUT", r"/_lfs/" + REPO + r"/(?P<oid>[0-9a-f]{64})", "lfs_put"),
    ("PUT", r"/_lfs/" + REPO + r"/(?P<oid>[0-9a-f]{64})/part/(?P<part>[1-9][0-9]*)", "lfs_put_part"),
    ("POST", r"/_lfs/" + REPO + r"/(?P<oid>[0-9a-f]{64})", "lfs_complete"),
    ("GET HEAD", r"/" + REPO + r"/resolve/(?P<rev>[^/]+)/(?P<path>.+)", "resolve"),
]
ROUTES = [(m.split(), re.compile(p + r"/?\Z"), h) for m, p, h in ROUTES]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "ptrain-test-hub/1"

    # --- plumbing ---------------------------------------------------------------------------

    def do_GET(self):
        self.dispatch()

    def do_HEAD(self):
        self.dispatch()

    def do_POST(self):
        self.dispatch()

    def do_PUT(self):
        self.dispatch()

    def do_DELETE(self):
        self.dispatch()

    def log_message(self, fmt, *args):
        if self.server.verbose:
            sys.stderr.write("hub_server: " + fmt % args + "\n")

    def dispatch(self):
        self.t0 = time.monotonic()
        split = urllib.parse.urlsplit(self.path)
        self.url_path, self.query = split.path, urllib.parse.parse_qs(split.query)
        self.body, self.body_kind, self.rec = None, "none", {}
        self.raw_query, self.logged = split.query, False
        self.lose = False
        if self.url_path.startswith(CONTROL_PREFIX):
            self.logged = True  # control requests are not logged
            return self.control()
        status = self.run_handler()
        self.log_request_record(status)

    def run_handler(self):
        """Apply faults, route and answer. Returns the status sent (0: connection closed unanswered)."""
        try:
            fault = self.apply_faults()
            if fault is not None:
                return fault
            handler, params = self.route()
            self.auth = self.check_token()
            return getattr(self, handler)(**params)
        except HubError as e:
            self.read_body_if_unread()
            return self.send_error_json(e)
        except Dropped as e:
            self.rec["fault"] = str(e) or self.rec.get("fault", "dropped")
            self.close_connection = True
            return 0
        except (ConnectionError, socket.timeout) as e:
            self.rec["error"] = "connection: %s" % e
            self.close_connection = True
            return 0
        except Exception as e:  # a bug here, not the client's: answer 500 and say so in the log
            self.close_connection = True
            return self.send_error_json(HubError(500, "hub_server internal error: %r" % e))

    def apply_faults(self):
        f = self.server.faults
        if f.hold or f.hold_file:
            waited = f.wait_hold()
            if waited > 0.01:
                self.rec["held_s"] = round(waited, 3)
        if f.slow > 0:
            time.sleep(f.slow)
            self.rec["slow_s"] = f.slow
        if f.down:
            self.rec["fault"] = "down"
            raise Dropped("down")
        if f.unauthorized:
            self.rec["fault"] = "unauthorized"
            self.read_body_if_unread()
            return self.send_error_json(HubError(401, "Invalid credentials in Authorization header"))
        rule = f.take_fail(self.command, self.url_path)
        if rule is not None:
            self.rec["fault"] = "fail"
            self.read_body_if_unread()
            headers = {"Retry-After": str(rule["retry_after"])} if "retry_after" in rule else None
            if rule["pad"]:  # an answer of that many more bytes (in the body only, not in a header)
                return self.send_json(rule["status"], {"error": "Injected fault", "pad": "x" * rule["pad"]})
            return self.send_error_json(HubError(rule["status"], "Injected fault: HTTP %d" % rule["status"],
                                                 headers=headers))
        self.lose = f.take_lose(self.command, self.url_path)
        return None

    def route(self):
        path = urllib.parse.unquote(self.url_path)
        for methods, regex, handler in ROUTES:
            m = regex.match(path)
            if m and self.command in methods:
                return handler, {k: v for k, v in m.groupdict().items()}
        self.read_body_if_unread()
        raise HubError(404, "Not found: %s %s" % (self.command, self.url_path))

    # --- auth -------------------------------------------------------------------------------

    def check_token(self):
        """'valid', 'missing' or raises 401 for a wrong or malformed token (the Hub does the same)."""
        header = self.headers.get("Authorization")
        if header is None:
            return "missing"
        if header.startswith("Bearer ") and hmac.compare_digest(header[7:].strip(), self.server.token):
            return "valid"
        self.rec["auth"] = "invalid"
        self.read_body_if_unread()
        raise HubError(401, "Invalid credentials in Authorization header")

    def require_write(self):
        if self.auth != "valid":
            raise HubError(401, "Invalid username or password.")

    def repo_for_read(self, repo_id):
        repo = self.server.store.get(repo_id)
        if repo is None or (repo.meta["private"] and self.auth != "valid"):
            status = 404 if self.auth == "valid" else 401
            raise HubError(status, "Repository not found", "RepoNotFound")
        return repo

    def repo_for_write(self, repo_id):
        self.require_write()
        repo = self.server.store.get(repo_id)
        if repo is None:
            raise HubError(404, "Repository not found", "RepoNotFound")
        return repo

    # --- bodies -----------------------------------------------------------------------------

    def body_stream(self):
        """A generator of body chunks (Content-Length or chunked); marks the body as read."""
        self.body = b""
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            return self.read_chunked()
        return self.read_length(int(self.headers.get("Content-Length") or 0))

    def read_length(self, n):
        while n > 0:
            chunk = self.rfile.read(min(n, 1 << 20))
            if not chunk:
                raise ConnectionError("client closed the connection mid-body")
            n -= len(chunk)
            yield chunk

    def read_chunked(self):
        while True:
            line = self.rfile.readline(65537)
            size = int(line.split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                    pass
                return
            yield from self.read_length(size)
            self.rfile.readline(65537)

    def read_body(self):
        if self.body is None:
            self.body = b"".join(self.body_stream())
            if self.body and self.body_kind == "none":
                self.body_kind = body_kind(self.headers.get("Content-Type"))
        return self.body

    def read_body_if_unread(self):
        if self.body is None:
            try:
                self.read_body()
            except (ConnectionError, ValueError):
                self.close_connection = True

    def read_json(self):
        data = self.read_body()
        try:
            doc = json.loads(data or b"null")
        except ValueError:
            raise HubError(400, "Invalid JSON body")
        self.rec["json"] = doc
        if not isinstance(doc, dict):
            raise HubError(400, "Expected a JSON object")
        return doc

    # --- answers ----------------------------------------------------------------------------

    def send_bytes(self, status, data, ctype="application/json; charset=utf-8", headers=None):
        if getattr(self, "lose", False) and 200 <= status < 300:  # applied, but the answer never arrives
            self.rec.update({"fault": "lose_answer", "lost_status": status})
            self.log_request_record(0)
            raise Dropped("lose_answer")
        self.log_request_record(status)
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("X-Request-Id", "Root=1-" + secrets.token_hex(12))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        return status

    def send_json(self, status, doc, headers=None, ctype="application/json; charset=utf-8"):
        return self.send_bytes(status, json.dumps(doc).encode(), ctype, headers)

    def send_error_json(self, err):
        headers = dict(err.headers)
        headers["X-Error-Message"] = err.message.encode("ascii", "backslashreplace").decode()
        if err.code:
            headers["X-Error-Code"] = err.code
        self.rec["error"] = err.message
        return self.send_json(err.status, {"error": err.message}, headers)

    def base_url(self):
        return "http://" + (self.headers.get("Host") or "%s:%d" % self.server.server_address[:2])

    # --- log --------------------------------------------------------------------------------

    def logged_headers(self):
        out = {}
        for name in LOGGED_HEADERS:
            value = self.headers.get(name)
            if value is not None:
                out[name] = "Bearer <REDACTED>" if name == "authorization" and value.startswith("Bearer ") \
                    else ("<REDACTED>" if name == "authorization" else value)
        return out

    def log_request_record(self, status):
        """Log this request once, before its answer goes out, so a client that has its answer can read it."""
        if self.logged:
            return
        self.logged = True
        rec = {"t": round(time.time(), 3), "method": self.command, "path": self.url_path,
               "query": self.raw_query, "status": status, "dur_s": round(time.monotonic() - self.t0, 3),
               "headers": self.logged_headers(), "auth": getattr(self, "auth", None),
               "body": {"kind": self.body_kind, "size": self.rec.pop("body_size", len(self.body or b""))}}
        rec.update(self.rec)
        self.server.log.write(rec)

    # --- control endpoint -------------------------------------------------------------------

    def control(self):
        faults = self.server.faults
        try:
            if self.url_path == "/_test/faults" and self.command == "POST":
                faults.update(self.read_json())
            elif self.url_path == "/_test/release" and self.command == "POST":
                self.read_body_if_unread()
                faults.release()
            elif self.url_path == "/_test/reset" and self.command == "POST":
                self.read_body_if_unread()
                faults.update({"reset": True})
            elif not (self.url_path == "/_test/faults" and self.command == "GET"):
                self.read_body_if_unread()
                raise HubError(404, "unknown control endpoint")
        except (HubError, ValueError, TypeError, re.error) as e:
            return self.send_json(400, {"error": "bad fault spec: %s" % e})
        state = faults.snapshot()
        state["requests_logged"] = self.server.log.seq
        self.send_json(200, state)

    # --- /api/repos, whoami, validate-yaml ----------------------------------------------------

    def api_create(self):
        doc = self.read_json()
        self.require_write()
        name, org = doc.get("name"), doc.get("organization") or self.server.user
        if not isinstance(name, str) or not re.fullmatch(r"[\w.-]+", name) or not re.fullmatch(r"[\w.-]+", org):
            raise HubError(400, "Invalid repo name")
        if doc.get("type", "model") not in (None, "model"):
            raise HubError(400, "This test server only hosts model repos")
        repo_id = org + "/" + name
        private = doc.get("private")
        if private is None:
            private = doc.get("visibility") == "private"
        with self.server.store.lock:
            if self.server.store.get(repo_id):
                return self.send_json(409, {"error": "You already created this model repo",
                                            "url": self.base_url() + "/" + repo_id},
                                      {"X-Error-Message": "You already created this model repo"})
            self.server.store.create(repo_id, bool(private))
        return self.send_json(200, {"url": self.base_url() + "/" + repo_id, "name": repo_id,
                                    "id": secrets.token_hex(12)})

    def api_delete(self):
        doc = self.read_json()
        repo_id = (doc.get("organization") or self.server.user) + "/" + str(doc.get("name"))
        self.repo_for_write(repo_id)
        with self.server.store.lock:
            self.server.store.delete(repo_id)
        return self.send_bytes(200, b"", "text/plain")

    def api_whoami(self):
        self.read_body_if_unread()
        self.require_write()
        return self.send_json(200, {"type": "user", "name": self.server.user, "fullname": self.server.user,
                                    "orgs": [], "auth": {"type": "access_token",
                                                         "accessToken": {"displayName": "test", "role": "write"}}})

    def api_validate_yaml(self):
        self.read_json()
        return self.send_json(200, {"errors": [], "warnings": []})

    def api_agent_harnesses(self):
        """huggingface_hub >= 2.x fetches this registry once a day; an empty one disables detection."""
        self.read_body_if_unread()
        return self.send_json(200, {"standardEnvVars": [], "harnesses": {}})

    # --- model info, tree, refs, commits -------------------------------------------------------

    def api_model_info(self, repo, rev=None):
        self.read_body_if_unread()
        r = self.repo_for_read(repo)
        with self.server.store.lock:
            commit = r.resolve(rev or "main")
        if commit is None:
            raise HubError(404, "Invalid rev id: %s" % rev, "RevisionNotFound")
        blobs = self.query.get("blobs", ["false"])[0].lower() in ("1", "true")
        siblings = [sibling(p, e, blobs) for p, e in sorted(commit["files"].items())]
        ns = repo.split("/")[0]
        return self.send_json(200, {
            "_id": hashlib.sha1(repo.encode()).hexdigest()[:24], "id": repo, "modelId": repo, "author": ns,
            "sha": commit["oid"], "lastModified": commit["date"], "createdAt": r.meta["createdAt"],
            "private": r.meta["private"], "gated": False, "disabled": False, "downloads": 0, "likes": 0,
            "tags": [], "siblings": siblings})

    def api_tree(self, repo, rev, path=None):
        self.read_body_if_unread()
        r = self.repo_for_read(repo)
        with self.server.store.lock:
            commit = r.resolve(rev)
        if commit is None:
            raise HubError(404, "Invalid rev id: %s" % rev, "RevisionNotFound")
        recursive = self.query.get("recursive", ["false"])[0].lower() in ("1", "true")
        entries = tree_entries(commit["files"], (path or "").strip("/"), recursive)
        if entries is None:
            raise HubError(404, "Entry not found: %s" % path, "EntryNotFound")
        page, headers = self.server.faults.tree_page, None
        if page > 0:  # the Hub pages long listings: Link: <URL with cursor>; rel="next"
            start = int(self.query.get("cursor", ["0"])[0] or 0)
            if start + page < len(entries):
                q = dict((k, v[0]) for k, v in self.query.items())
                q["cursor"] = str(start + page)
                headers = {"Link": '<%s%s?%s>; rel="next"' % (self.base_url(), self.url_path,
                                                              urllib.parse.urlencode(q))}
            entries = entries[start:start + page]
        return self.send_json(200, entries, headers)

    def api_refs(self, repo):
        self.read_body_if_unread()
        r = self.repo_for_read(repo)
        branches = [{"name": b, "ref": "refs/heads/" + b, "targetCommit": oid}
                    for b, oid in sorted(r.meta["branches"].items())]
        return self.send_json(200, {"branches": branches, "converts": [], "tags": []})

    def api_commits(self, repo, rev):
        self.read_body_if_unread()
        r = self.repo_for_read(repo)
        with self.server.store.lock:
            commit, out = r.resolve(rev), []
            while commit is not None:
                out.append({"id": commit["oid"], "title": commit["summary"], "message": commit["description"],
                            "authors": [{"user": self.server.user}], "date": commit["date"]})
                commit = r.commit(commit["parent"]) if commit["parent"] else None
        if not out:
            raise HubError(404, "Invalid rev id: %s" % rev, "RevisionNotFound")
        return self.send_json(200, out)

    # --- preupload and commit ---------------------------------------------------------------

    def api_preupload(self, repo, rev):
        doc = self.read_json()
        r = self.repo_for_write(repo)
        with self.server.store.lock:
            commit = r.resolve(rev)
        if commit is None:
            raise HubError(404, "Invalid rev id: %s" % rev, "RevisionNotFound")
        files = doc.get("files")
        if not isinstance(files, list):
            raise HubError(400, "Invalid preupload body: files must be a list")
        out = [self.preupload_one(f, commit["files"]) for f in files]
        return self.send_json(200, {"files": out, "commitOid": commit["oid"]})

    def preupload_one(self, f, current):
        if not isinstance(f, dict) or not isinstance(f.get("path"), str) or not isinstance(f.get("size"), int):
            raise HubError(400, "Invalid preupload entry: need path (string) and size (integer)")
        try:
            sample = base64.b64decode(f.get("sample", ""), validate=True)
        except ValueError:
            raise HubError(400, "Invalid preupload sample for " + f["path"])
        path = f["path"].strip("/")
        lfs = f["size"] > self.server.lfs_threshold or looks_binary(sample) or matches_gitattributes_lfs(path)
        entry, oid = current.get(path), None
        if entry is not None:
            oid = entry["lfs"] if entry.get("lfs") else entry["blob"]
        return {"path": f["path"], "uploadMode": "lfs" if lfs else "regular", "shouldIgnore": False, "oid": oid}

    def api_commit(self, repo, rev):
        ctype = self.headers.get("Content-Type", "").split(";")[0].strip()
        data = self.read_body()
        r = self.repo_for_write(repo)
        if self.query.get("create_pr"):
            raise HubError(400, "create_pr is not supported by this test server")
        if ctype != "application/x-ndjson":
            raise HubError(400, "Commit body must be application/x-ndjson, got %r" % ctype)
        header, ops = parse_ndjson_commit(data, self.rec)
        with self.server.store.lock:
            oid = self.server.store.apply_commit(r, rev, header, ops)
        self.rec["commit_oid"] = oid
        return self.send_json(200, {"success": True, "commitOid": oid, "hookOutput": "",
                                    "commitUrl": "%s/%s/commit/%s" % (self.base_url(), repo, oid)})

    # --- git LFS ------------------------------------------------------------------------------

    def lfs_batch(self, repo):
        doc = self.read_json()
        r = self.repo_for_write(repo)
        if doc.get("operation") != "upload":
            raise HubError(422, "Only the upload operation is supported by this test server")
        if "basic" not in (doc.get("transfers") or ["basic"]):
            raise HubError(422, "No supported transfer adapter (this server offers basic)")
        objects = doc.get("objects")
        if not isinstance(objects, list):
            raise HubError(422, "objects must be a list")
        multipart = self.server.faults.multipart if "multipart" in (doc.get("transfers") or []) else None
        out = [self.lfs_batch_object(r, o, multipart) for o in objects]
        chosen = "multipart" if any("chunk_size" in o.get("actions", {}).get("upload", {}).get("header", {})
                                    for o in out) else "basic"
        return self.send_json(200, {"transfer": chosen, "objects": out}, ctype="application/vnd.git-lfs+json")

    def lfs_batch_object(self, repo, obj, multipart):
        obj = obj if isinstance(obj, dict) else {}
        oid, size = obj.get("oid"), obj.get("size")
        if not isinstance(oid, str) or not re.fullmatch(r"[0-9a-f]{64}", oid) or not isinstance(size, int) or size < 0:
            return {"oid": str(oid), "size": size if isinstance(size, int) else 0,
                    "error": {"code": 422, "message": "Invalid object: oid must be sha256 hex, size >= 0"}}
        if repo.has_lfs(oid) and os.path.getsize(repo.path("lfs", oid)) == size:
            return {"oid": oid, "size": size}
        sig = self.server.sign(repo.id, oid, size)
        href = "%s/_lfs/%s/%s?size=%d&sig=%s" % (self.base_url(), repo.id, oid, size, sig)
        expires = (datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)).isoformat()
        verify = "%s/%s.git/info/lfs/objects/verify" % (self.base_url(), repo.id)
        upload = {"href": href, "expires_at": expires}
        if multipart and size >= multipart["threshold"]:
            upload["header"] = self.multipart_header(href, size, multipart["chunk"])
        return {"oid": oid, "size": size, "authenticated": True,
                "actions": {"upload": upload, "verify": {"href": verify, "expires_at": expires}}}

    def multipart_header(self, href, size, chunk):
        """HF multipart: chunk_size and one pre-signed PUT url per part; the upload href takes the completion POST."""
        base, query = href.split("?", 1)
        header = {"chunk_size": str(chunk)}
        for n in range(1, max(1, -(-size // chunk)) + 1):
            header[str(n)] = "%s/part/%d?%s" % (base, n, query)
        return header

    def lfs_put(self, repo, oid):
        r, size = self.check_presigned(repo, oid)
        got, digest, tmp = self.receive_put(r, size)
        if got != size or digest != oid:
            os.unlink(tmp)
            raise HubError(400, "BadDigest: received %d bytes with sha256 %s, expected %d bytes with sha256 %s"
                           % (got, digest, size, oid))
        os.replace(tmp, r.path("lfs", oid))
        return self.send_bytes(200, b"", "text/plain", {"ETag": '"%s"' % hashlib.md5(oid.encode()).hexdigest()})

    def lfs_put_part(self, repo, oid, part):
        r, size = self.check_presigned(repo, oid)
        got, digest, tmp = self.receive_put(r, None)
        os.makedirs(r.path("lfs", ".parts", oid), exist_ok=True)
        os.replace(tmp, r.path("lfs", ".parts", oid, part))
        return self.send_bytes(200, b"", "text/plain", {"ETag": '"%s"' % digest[:32]})

    def lfs_complete(self, repo, oid):
        """The multipart completion POST {"oid", "parts": [{"partNumber", "etag"}]}: join, check, store."""
        doc = self.read_json()
        r, size = self.check_presigned(repo, oid)
        parts = doc.get("parts")
        if doc.get("oid") != oid or not isinstance(parts, list) or not parts:
            raise HubError(400, "Invalid completion body: need the oid and a non-empty parts list")
        h, tmp = hashlib.sha256(), r.path("lfs", ".parts", oid + ".joined")
        with open(tmp, "wb") as out:
            for n, part in enumerate(parts, 1):
                for chunk in self.read_part(r, oid, n, part):
                    h.update(chunk)
                    out.write(chunk)
        if os.path.getsize(tmp) != size or h.hexdigest() != oid:
            raise HubError(400, "BadDigest: the joined parts are %d bytes with sha256 %s, expected %d bytes, %s"
                           % (os.path.getsize(tmp), h.hexdigest(), size, oid))
        os.replace(tmp, r.path("lfs", oid))
        shutil.rmtree(r.path("lfs", ".parts", oid), ignore_errors=True)
        return self.send_json(200, {"success": True})

    def read_part(self, repo, oid, n, part):
        path = repo.path("lfs", ".parts", oid, str(n))
        if not isinstance(part, dict) or part.get("partNumber") != n or not os.path.isfile(path):
            raise HubError(400, "Invalid completion: part %d missing or out of order" % n)
        with open(path, "rb") as f:
            data = f.read()
        if str(part.get("etag", "")).strip('"') != hashlib.sha256(data).hexdigest()[:32]:
            raise HubError(400, "Invalid completion: etag of part %d does not match" % n)
        yield data

    def check_presigned(self, repo, oid):
        """A pre-signed upload URL: no Authorization header, a valid sig for (repo, oid, size). -> (repo, size)"""
        if "Authorization" in self.headers:
            # a pre-signed S3 URL on the real Hub: S3 refuses a second auth mechanism (and the token must
            # never go to the storage host)
            self.read_body_if_unread()
            raise HubError(400, "InvalidArgument: Only one auth mechanism allowed; the pre-signed URL "
                                "already authenticates, do not send an Authorization header")
        size = int(self.query.get("size", ["-1"])[0])
        if not hmac.compare_digest(self.query.get("sig", [""])[0], self.server.sign(repo, oid, size)):
            self.read_body_if_unread()
            raise HubError(403, "SignatureDoesNotMatch: bad or missing sig for this upload URL")
        r = self.server.store.get(repo)
        if r is None:
            self.read_body_if_unread()
            raise HubError(404, "Repository not found", "RepoNotFound")
        return r, size

    def receive_put(self, repo, size):
        """Stream the PUT body to a temp file, hashing it; the drop_put fault cuts it short."""
        self.body_kind = "binary"
        drop = self.server.faults.take_drop()
        after = self.server.faults.drop_put["after"]
        if after is None:
            after = max(1, int(self.headers.get("Content-Length") or size or 2) // 2)
        fd, tmp = tempfile.mkstemp(dir=repo.path("lfs"), prefix=".put-")
        h, got = hashlib.sha256(), 0
        with os.fdopen(fd, "wb") as f:
            for chunk in self.body_stream():
                if drop and got + len(chunk) >= after:
                    f.close()
                    os.unlink(tmp)
                    self.rec.update(body_size=got + len(chunk), fault="drop_put")
                    self.log_request_record(0)
                    self.connection.shutdown(socket.SHUT_RDWR)
                    raise Dropped("drop_put")
                f.write(chunk)
                h.update(chunk)
                got += len(chunk)
        self.rec["body_size"] = got
        return got, h.hexdigest(), tmp

    def lfs_verify(self, repo):
        doc = self.read_json()
        r = self.repo_for_write(repo)
        oid, size = doc.get("oid"), doc.get("size")
        if not isinstance(oid, str) or not r.has_lfs(oid):
            raise HubError(404, "Object not found: %s" % oid)
        if os.path.getsize(r.path("lfs", oid)) != size:
            raise HubError(422, "Object %s has size %d, not %r" % (oid, os.path.getsize(r.path("lfs", oid)), size))
        return self.send_json(200, {"success": True}, ctype="application/vnd.git-lfs+json")

    # --- resolve (file download) ----------------------------------------------------------------

    def resolve(self, repo, rev, path):
        self.read_body_if_unread()
        r = self.repo_for_read(repo)
        with self.server.store.lock:
            commit = r.resolve(rev)
        if commit is None:
            raise HubError(404, "Invalid rev id: %s" % rev, "RevisionNotFound")
        entry = commit["files"].get(path)
        if entry is None:
            raise HubError(404, "Entry not found", "EntryNotFound", {"X-Repo-Commit": commit["oid"]})
        headers = {"X-Repo-Commit": commit["oid"], "Accept-Ranges": "bytes",
                   "ETag": '"%s"' % (entry["lfs"] or entry["blob"])}
        if entry.get("lfs"):
            headers.update({"X-Linked-Etag": '"%s"' % entry["lfs"], "X-Linked-Size": str(entry["size"])})
        data = r.read_file(entry) if self.command == "GET" else None
        return self.send_file(entry["size"], data, headers)

    def send_file(self, size, data, headers):
        """200 with the whole file, or 206 for a 'Range: bytes=A-[B]' request."""
        m = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
        status, start, end = 200, 0, size
        if m and int(m.group(1)) < size:
            status, start = 206, int(m.group(1))
            end = min(size, int(m.group(2)) + 1) if m.group(2) else size
            headers["Content-Range"] = "bytes %d-%d/%d" % (start, end - 1, size)
        self.log_request_record(status)
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(end - start))
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        if data is not None:
            self.wfile.write(data[start:end])
        return status


def sibling(path, entry, blobs):
    out = {"rfilename": path}
    if blobs:
        out.update({"size": entry["size"], "blobId": entry["blob"]})
        if entry.get("lfs"):
            out["lfs"] = {"sha256": entry["lfs"], "size": entry["size"],
                          "pointerSize": len(lfs_pointer(entry["lfs"], entry["size"]))}
    return out


def tree_entries(files, prefix, recursive):
    """The Hub's tree listing of PREFIX ('' = root); None when PREFIX is not a directory."""
    base = prefix + "/" if prefix else ""
    under = {p: e for p, e in files.items() if p.startswith(base)}
    if prefix and not under:
        return None
    dirs, out = set(), []
    for path, entry in sorted(under.items()):
        rest = path[len(base):].split("/")
        for depth in range(1, len(rest)):
            if recursive or depth == 1:
                dirs.add(base + "/".join(rest[:depth]))
        if recursive or len(rest) == 1:
            item = {"type": "file", "oid": entry["blob"], "size": entry["size"], "path": path}
            if entry.get("lfs"):
                item["lfs"] = {"oid": entry["lfs"], "size": entry["size"],
                               "pointerSize": len(lfs_pointer(entry["lfs"], entry["size"]))}
            out.append(item)
    folders = [{"type": "directory", "oid": hashlib.sha1(d.encode()).hexdigest(), "size": 0, "path": d}
               for d in sorted(dirs)]
    return folders + out


def body_kind(content_type):
    """How the log names a body: json, ndjson, text or binary (from its Content-Type)."""
    ctype = (content_type or "").split(";")[0].strip().lower()
    if ctype == "application/x-ndjson":
        return "ndjson"
    if ctype.endswith("json"):
        return "json"
    return "text" if ctype.startswith("text/") else "binary"


def parse_ndjson_commit(data, rec):
    """Split a commit body into (header value, operations); records the parsed lines in REC."""
    lines = []
    for n, line in enumerate(data.split(b"\n"), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError:
            raise HubError(400, "Invalid NDJSON on line %d" % n)
        if not isinstance(item, dict):
            raise HubError(400, "NDJSON line %d is not an object" % n)
        lines.append(item)
    rec["commit"] = summarize_commit(lines)
    if not lines or lines[0].get("key") != "header" or not isinstance(lines[0].get("value"), dict):
        raise HubError(400, "The first NDJSON line of a commit must be {\"key\": \"header\", ...}")
    return lines[0]["value"], lines[1:]


# ---------------------------------------------------------------------------------------------
# Server and command line
# ---------------------------------------------------------------------------------------------

class HubServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True

    def __init__(self, addr, args):
        super().__init__(addr, Handler)
        self.token, self.user, self.verbose = args.token, args.user, args.verbose
        self.lfs_threshold = args.lfs_threshold
        self.store = Store(args.root, args.user)
        self.log = RequestLog(args.log)
        self.faults = Faults()
        self.secret = secrets.token_bytes(16)

    def sign(self, repo_id, oid, size):
        msg = ("%s\n%s\n%d" % (repo_id, oid, size)).encode()
        return hmac.new(self.secret, msg, hashlib.sha256).hexdigest()[:32]


def parse_args(argv):
    p = argparse.ArgumentParser(description="Local Hugging Face Hub stand-in for tests.")
    p.add_argument("--root", required=True, help="directory holding the repos (created if missing)")
    p.add_argument("--token", required=True, help="the only token accepted (Authorization: Bearer TOKEN)")
    p.add_argument("--log", help="JSON-lines request log to append to")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="0 (default) = a free port")
    p.add_argument("--port-file", help="write the bound port here (atomically) once listening")
    p.add_argument("--user", default="ptrain-test", help="namespace for repos created without organization")
    p.add_argument("--lfs-threshold", type=int, default=LFS_THRESHOLD,
                   help="preupload answers lfs above this size (default 10 MiB, as the Hub)")
    p.add_argument("--multipart-threshold", type=int, metavar="BYTES",
                   help="offer HF multipart LFS uploads for objects of at least BYTES when the client lists "
                        "'multipart' in transfers (default: never, basic only)")
    p.add_argument("--multipart-chunk", type=int, default=5 * 1024 * 1024, metavar="BYTES",
                   help="part size of multipart uploads (default 5 MiB)")
    p.add_argument("--verbose", action="store_true", help="print each request to stderr")
    f = p.add_argument_group("faults (also settable with POST /_test/faults)")
    f.add_argument("--down", action="store_true", help="close every connection without an answer")
    f.add_argument("--unauthorized", "--always-401", action="store_true", help="answer 401 to everything")
    f.add_argument("--fail", action="append", default=[], metavar="N:STATUS[:REGEX]",
                   help="the first N requests whose 'METHOD /path' matches REGEX get STATUS (repeatable)")
    f.add_argument("--drop-put", metavar="N[:BYTES]", help="the first N LFS PUTs: read BYTES (default half) then close")
    f.add_argument("--slow", type=float, default=0.0, metavar="S", help="sleep S seconds before each answer")
    f.add_argument("--hold", action="store_true", help="block every request until POST /_test/release")
    f.add_argument("--hold-file", metavar="PATH", help="block every request until PATH exists")
    return p.parse_args(argv)


def initial_faults(args):
    spec = {"down": args.down, "unauthorized": args.unauthorized, "slow": args.slow, "hold": args.hold,
            "fail": args.fail}
    if args.hold_file:
        spec["hold_file"] = args.hold_file
    if args.drop_put:
        spec["drop_put"] = args.drop_put
    if args.multipart_threshold is not None:
        spec["multipart"] = {"threshold": args.multipart_threshold, "chunk": args.multipart_chunk}
    return spec


def announce(port, port_file):
    if port_file:
        tmp = port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % port)
        os.replace(tmp, port_file)
    print("listening on %d" % port, flush=True)


def main(argv=None):
    args = parse_args(argv)
    server = HubServer((args.host, args.port), args)
    server.faults.update(initial_faults(args))

    def stop(signum, frame):
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    announce(server.server_address[1], args.port_file)
    try:
        server.serve_forever(poll_interval=0.1)
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
