"""A small Hub-compatible HTTP server for tests (loopback only, in memory).

It implements the routes that the real ``huggingface_hub`` and ``datasets``
clients call to create a dataset repository, commit to it (regular files inline,
LFS files through the batch API and one PUT), list and download its files, so
that ``evalita-data push`` and ``datasets.load_dataset`` run end to end against it
(see /work/shared/HUB-TESTING.md). Set ``HF_ENDPOINT`` to :attr:`HubStub.url` and
``HF_HUB_DISABLE_XET=1`` in the client's environment before it imports the libraries.

Test-only code: no persistence, no access control beyond recording the
``Authorization`` header of every request.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

import yaml

LFS_SUFFIXES = (".parquet", ".arrow", ".bin", ".safetensors")
GITATTRIBUTES = b"*.parquet filter=lfs diff=lfs merge=lfs -text\n*.arrow filter=lfs diff=lfs merge=lfs -text\n"
# Licenses the stub's /api/validate-yaml accepts (a subset of the Hub's list).
KNOWN_LICENSES = {
    "apache-2.0", "mit", "other", "unknown", "cc0-1.0",
    "cc-by-2.0", "cc-by-2.5", "cc-by-3.0", "cc-by-4.0", "cc-by-sa-3.0", "cc-by-sa-4.0",
    "cc-by-nc-2.0", "cc-by-nc-3.0", "cc-by-nc-4.0", "cc-by-nd-4.0", "cc-by-nc-nd-3.0", "cc-by-nc-nd-4.0",
    "cc-by-nc-sa-2.0", "cc-by-nc-sa-3.0", "cc-by-nc-sa-4.0",
}


@dataclass
class StoredFile:
    data: bytes
    lfs: bool

    @property
    def git_oid(self) -> str:
        if self.lfs:
            return hashlib.sha1(b"blob %d\0" % len(self.pointer) + self.pointer).hexdigest()
        return hashlib.sha1(b"blob %d\0" % len(self.data) + self.data).hexdigest()

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    @property
    def pointer(self) -> bytes:
        return f"version https://git-lfs.github.com/spec/v1\noid sha256:{self.sha256}\nsize {len(self.data)}\n".encode()


@dataclass
class Commit:
    sha: str
    parent: str | None
    summary: str
    files: dict[str, StoredFile]


@dataclass
class Repo:
    repo_id: str
    private: bool
    branches: dict[str, str] = field(default_factory=dict)
    commits: dict[str, Commit] = field(default_factory=dict)

    def resolve(self, rev: str) -> Commit | None:
        sha = self.branches.get(rev, rev)
        return self.commits.get(sha)

    def commit(self, branch: str, summary: str, files: dict[str, StoredFile]) -> Commit:
        parent = self.branches.get(branch)
        digest = hashlib.sha1(json.dumps([parent, summary, sorted((p, f.sha256) for p, f in files.items())]).encode())
        digest.update(str(len(self.commits)).encode())
        c = Commit(digest.hexdigest(), parent, summary, files)
        self.commits[c.sha] = c
        self.branches[branch] = c.sha
        return c

    def user_commits(self) -> int:
        """Commits after the one that created the repository."""
        return len(self.commits) - 1


class HubState:
    """Everything the stub holds; tests read it to check what the client did."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.repos: dict[str, Repo] = {}
        self.lfs: dict[str, bytes] = {}
        self.requests: list[tuple[str, str, str | None]] = []  # (method, path, Authorization)
        # Route name -> (number of next requests to fail, HTTP status), to test retries and errors.
        self.fail_next: dict[str, tuple[int, int]] = {}


class _Handler(BaseHTTPRequestHandler):
    server: "_Server"
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - keep test output quiet
        pass

    # --- plumbing -------------------------------------------------------------------------
    @property
    def state(self) -> HubState:
        return self.server.state

    def _body(self) -> bytes:
        n = int(self.headers.get("Content-Length") or 0)
        if n:
            return self.rfile.read(n)
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().strip(), 16)
                if size == 0:
                    self.rfile.readline()
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(chunks)
        return b""

    def _send(self, status: int, body: bytes = b"", headers: dict | None = None, head: bool = False) -> None:
        self.send_response(status)
        hdrs = {"Content-Type": "application/json", **(headers or {})}
        hdrs.setdefault("Content-Length", str(len(body)))
        for k, v in hdrs.items():
            self.send_header(k, v)
        self.end_headers()
        if not head and body:
            self.wfile.write(body)

    def _json(self, status: int, obj: object, headers: dict | None = None) -> None:
        self._send(status, json.dumps(obj).encode(), headers)

    def _error(self, status: int, code: str | None, message: str, head: bool = False) -> None:
        headers = {"X-Error-Message": message}
        if code:
            headers["X-Error-Code"] = code
        self._send(status, json.dumps({"error": message}).encode(), headers, head=head)

    def _dispatch(self, method: str) -> None:
        url = urlsplit(self.path)
        path, query = url.path, parse_qs(url.query)
        body = self._body() if method in ("POST", "PUT") else b""
        with self.state.lock:
            self.state.requests.append((method, path, self.headers.get("Authorization")))
        for pattern, route_method, name, handler in ROUTES:
            m = pattern.fullmatch(path)
            if m and route_method == method:
                with self.state.lock:
                    failures, status = self.state.fail_next.get(name, (0, 503))
                    if failures:
                        self.state.fail_next[name] = (failures - 1, status)
                if failures:
                    return self._error(status, None, f"stub: injected failure {status}", head=method == "HEAD")
                with self.state.lock:
                    return handler(self, m, query, body)
        self._error(404, None, f"stub: no route for {method} {path}", head=method == "HEAD")

    def do_GET(self) -> None:  # noqa: N802
        self._dispatch("GET")

    def do_HEAD(self) -> None:  # noqa: N802
        self._dispatch("HEAD")

    def do_POST(self) -> None:  # noqa: N802
        self._dispatch("POST")

    def do_PUT(self) -> None:  # noqa: N802
        self._dispatch("PUT")

    # --- helpers over the state -----------------------------------------------------------
    def _repo(self, m: re.Match, head: bool = False) -> Repo | None:
        repo = self.state.repos.get(unquote(m["repo"]))
        if repo is None:
            self._error(404, "RepoNotFound", f"Repository {m['repo']} not found", head=head)
        return repo

    def _commit(self, repo: Repo, rev: str, head: bool = False) -> Commit | None:
        c = repo.resolve(unquote(rev))
        if c is None:
            self._error(404, "RevisionNotFound", f"Invalid rev id: {unquote(rev)}", head=head)
        return c

    def _repo_commit(self, m: re.Match, rev: str | None = None, head: bool = False) -> tuple[Repo, Commit] | None:
        repo = self._repo(m, head)
        if repo is None:
            return None
        c = self._commit(repo, rev or m["rev"], head)
        return None if c is None else (repo, c)

    def _base(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    # --- routes -------------------------------------------------------------------------
    def whoami(self, m, q, body) -> None:
        self._json(200, {"type": "user", "name": "stub-user", "orgs": [], "auth": {"type": "access_token"}})

    def create_repo(self, m, q, body) -> None:
        payload = json.loads(body or b"{}")
        repo_id = f"{payload.get('organization') or 'stub-user'}/{payload['name']}"
        if payload.get("type", "model") != "dataset":
            return self._error(400, None, "the stub only holds dataset repositories")
        if repo_id in self.state.repos:
            return self._error(409, None, "You already created this dataset repo")
        private = payload.get("visibility") == "private" or bool(payload.get("private"))
        repo = Repo(repo_id, private)
        repo.commit("main", "initial commit", {".gitattributes": StoredFile(GITATTRIBUTES, False)})
        self.state.repos[repo_id] = repo
        self._json(200, {"url": f"{self._base()}/datasets/{repo_id}", "name": repo_id, "id": repo_id})

    def validate_yaml(self, m, q, body) -> None:
        content = json.loads(body).get("content", "")
        errors = []
        match = re.match(r"---\n(.*?)\n---\n", content, re.S)
        meta = {}
        if match:
            try:
                meta = yaml.safe_load(match.group(1)) or {}
            except yaml.YAMLError as err:
                errors.append(f"invalid YAML: {err}")
        lic = meta.get("license")
        for value in ([lic] if isinstance(lic, str) else lic or []):
            if value not in KNOWN_LICENSES:
                errors.append(f'"license" must be a Hub license id, got {value!r}')
        if lic == "other" and not meta.get("license_name"):
            errors.append('"license_name" is required when "license" is "other"')
        if errors:
            return self._json(400, {"errors": [{"message": e} for e in errors]})
        self._json(200, {"errors": [], "warnings": []})

    def repo_info(self, m, q, body) -> None:
        found = self._repo_commit(m, m["rev"] or "main")
        if found is None:
            return
        repo, c = found
        card = None
        readme = c.files.get("README.md")
        if readme is not None:
            match = re.match(rb"---\n(.*?)\n---\n", readme.data, re.S)
            card = yaml.safe_load(match.group(1)) if match else None
        self._json(200, {
            "_id": hashlib.md5(repo.repo_id.encode()).hexdigest()[:24],
            "id": repo.repo_id, "author": repo.repo_id.split("/")[0], "sha": c.sha, "private": repo.private,
            "disabled": False, "gated": False, "downloads": 0, "likes": 0, "tags": [],
            "lastModified": "2026-01-01T00:00:00.000Z", "createdAt": "2026-01-01T00:00:00.000Z",
            "cardData": card, "siblings": [{"rfilename": p} for p in sorted(c.files)],
        })

    def _entry(self, path: str, f: StoredFile) -> dict:
        entry = {"type": "file", "oid": f.git_oid, "size": len(f.data), "path": path}
        if f.lfs:
            entry["lfs"] = {"oid": f.sha256, "size": len(f.data), "pointerSize": len(f.pointer)}
        return entry

    def _folders(self, c: Commit) -> set[str]:
        out = set()
        for p in c.files:
            parts = p.split("/")[:-1]
            out.update("/".join(parts[: i + 1]) for i in range(len(parts)))
        return out

    def tree(self, m, q, body) -> None:
        found = self._repo_commit(m)
        if found is None:
            return
        repo, c = found
        base = unquote(m["path"] or "").strip("/")
        recursive = q.get("recursive", ["false"])[0].lower() in ("1", "true")
        prefix = base + "/" if base else ""
        folders = self._folders(c)
        if base and base not in folders:
            return self._error(404, "EntryNotFound", f"{base} does not exist on {m['rev']}")
        out = []
        for folder in sorted(folders):
            rest = folder[len(prefix):]
            if folder.startswith(prefix) and rest and (recursive or "/" not in rest):
                out.append({"type": "directory", "oid": hashlib.sha1(folder.encode()).hexdigest(), "size": 0, "path": folder})
        for p, f in sorted(c.files.items()):
            rest = p[len(prefix):]
            if p.startswith(prefix) and (recursive or "/" not in rest):
                out.append(self._entry(p, f))
        self._json(200, out)

    def paths_info(self, m, q, body) -> None:
        found = self._repo_commit(m)
        if found is None:
            return
        repo, c = found
        ctype = self.headers.get("Content-Type", "")
        paths = json.loads(body).get("paths", []) if "json" in ctype else parse_qs(body.decode()).get("paths", [])
        folders = self._folders(c)
        out = []
        for p in paths:
            p = p.strip("/")
            if p in c.files:
                out.append(self._entry(p, c.files[p]))
            elif p in folders:
                out.append({"type": "directory", "oid": hashlib.sha1(p.encode()).hexdigest(), "size": 0, "path": p})
        self._json(200, out)

    def preupload(self, m, q, body) -> None:
        repo = self._repo(m)
        if repo is None:
            return
        files = json.loads(body)["files"]
        answer = []
        for f in files:
            lfs = f["path"].endswith(LFS_SUFFIXES) or f.get("size", 0) > 10_000_000
            answer.append({"path": f["path"], "uploadMode": "lfs" if lfs else "regular", "shouldIgnore": False})
        self._json(200, {"files": answer, "commitOid": repo.branches.get(unquote(m["rev"]))})

    def lfs_batch(self, m, q, body) -> None:
        repo = self._repo(m)
        if repo is None:
            return
        payload = json.loads(body)
        objects = []
        for obj in payload["objects"]:
            entry = {"oid": obj["oid"], "size": obj["size"]}
            if obj["oid"] not in self.state.lfs:
                entry["actions"] = {"upload": {"href": f"{self._base()}/lfs-upload/{obj['oid']}", "header": {}}}
            objects.append(entry)
        self._send(200, json.dumps({"transfer": "basic", "objects": objects}).encode(),
                   {"Content-Type": "application/vnd.git-lfs+json"})

    def lfs_upload(self, m, q, body) -> None:
        oid = m["oid"]
        if hashlib.sha256(body).hexdigest() != oid:
            return self._error(400, None, "uploaded content does not match its sha256")
        self.state.lfs[oid] = body
        self._send(200)

    def commit(self, m, q, body) -> None:
        repo = self._repo(m)
        if repo is None:
            return
        branch = unquote(m["rev"])
        if branch not in repo.branches:
            return self._error(404, "RevisionNotFound", f"Invalid rev id: {branch}")
        lines = [json.loads(line) for line in body.decode().splitlines() if line.strip()]
        header = lines[0]["value"]
        parent = header.get("parentCommit")
        if parent is not None and parent != repo.branches[branch]:
            return self._error(412, None, "A commit has happened since. Please refresh and try again.")
        files = dict(repo.commits[repo.branches[branch]].files)
        for item in lines[1:]:
            key, value = item["key"], item["value"]
            if key == "file":
                files[value["path"]] = StoredFile(base64.b64decode(value["content"]), False)
            elif key == "lfsFile":
                data = self.state.lfs.get(value["oid"])
                if data is None:
                    return self._error(400, None, f"LFS object {value['oid']} was not uploaded")
                files[value["path"]] = StoredFile(data, True)
            elif key == "deletedFile":
                files.pop(value["path"], None)
            elif key == "deletedFolder":
                prefix = value["path"].rstrip("/") + "/"
                files = {p: f for p, f in files.items() if not p.startswith(prefix)}
            else:
                return self._error(400, None, f"unknown commit operation {key!r}")
        c = repo.commit(branch, header.get("summary", ""), files)
        self._json(200, {"success": True, "commitOid": c.sha,
                         "commitUrl": f"{self._base()}/datasets/{repo.repo_id}/commit/{c.sha}",
                         "commitMessage": c.summary})

    def create_branch(self, m, q, body) -> None:
        repo = self._repo(m)
        if repo is None:
            return
        branch = unquote(m["branch"])
        if branch in repo.branches:
            return self._error(409, None, f"Reference already exists: refs/heads/{branch}")
        start = (json.loads(body) if body else {}).get("startingPoint") or "main"
        c = self._commit(repo, start)
        if c is None:
            return
        repo.branches[branch] = c.sha
        self._json(200, {})

    def resolve(self, m, q, body, head: bool = False) -> None:
        found = self._repo_commit(m, head=head)
        if found is None:
            return
        c = found[1]
        path = unquote(m["path"])
        f = c.files.get(path)
        if f is None:
            return self._error(404, "EntryNotFound", f"{path} does not exist on {m['rev']}", head=head)
        headers = {"X-Repo-Commit": c.sha, "ETag": f'"{f.git_oid}"', "Content-Type": "application/octet-stream",
                   "Accept-Ranges": "bytes"}
        if f.lfs:
            headers.update({"X-Linked-Etag": f'"{f.sha256}"', "X-Linked-Size": str(len(f.data))})
        data, status = f.data, 200
        rng = re.fullmatch(r"bytes=(\d*)-(\d*)", self.headers.get("Range", ""))
        if rng:
            start = int(rng[1]) if rng[1] else max(len(data) - int(rng[2]), 0)
            end = int(rng[2]) if rng[1] and rng[2] else len(data) - 1
            end = min(end, len(data) - 1)
            headers["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
            data, status = data[start:end + 1], 206
        self._send(status, data, headers, head=head)

    def resolve_head(self, m, q, body) -> None:
        self.resolve(m, q, body, head=True)


_REPO = r"(?P<repo>[^/]+/[^/]+)"
ROUTES = [
    (re.compile(r"/api/whoami-v2"), "GET", "whoami", _Handler.whoami),
    (re.compile(r"/api/repos/create"), "POST", "create", _Handler.create_repo),
    (re.compile(r"/api/validate-yaml"), "POST", "validate-yaml", _Handler.validate_yaml),
    (re.compile(rf"/api/datasets/{_REPO}(?:/revision/(?P<rev>[^/]+))?"), "GET", "info", _Handler.repo_info),
    (re.compile(rf"/api/datasets/{_REPO}/tree/(?P<rev>[^/]+)(?:/(?P<path>.*))?"), "GET", "tree", _Handler.tree),
    (re.compile(rf"/api/datasets/{_REPO}/paths-info/(?P<rev>[^/]+)"), "POST", "paths-info", _Handler.paths_info),
    (re.compile(rf"/api/datasets/{_REPO}/preupload/(?P<rev>[^/]+)"), "POST", "preupload", _Handler.preupload),
    (re.compile(rf"/api/datasets/{_REPO}/commit/(?P<rev>[^/]+)"), "POST", "commit", _Handler.commit),
    (re.compile(rf"/api/datasets/{_REPO}/branch/(?P<branch>[^/]+)"), "POST", "branch", _Handler.create_branch),
    (re.compile(rf"/datasets/{_REPO}\.git/info/lfs/objects/batch"), "POST", "lfs-batch", _Handler.lfs_batch),
    (re.compile(r"/lfs-upload/(?P<oid>[0-9a-f]{64})"), "PUT", "lfs-upload", _Handler.lfs_upload),
    (re.compile(rf"/datasets/{_REPO}/resolve/(?P<rev>[^/]+)/(?P<path>.+)"), "GET", "resolve", _Handler.resolve),
    (re.compile(rf"/datasets/{_REPO}/resolve/(?P<rev>[^/]+)/(?P<path>.+)"), "HEAD", "resolve", _Handler.resolve_head),
]


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    state: HubState


class HubStub:
    """The stub server on 127.0.0.1 and a free port, served from a background thread."""

    def __init__(self) -> None:
        self.state = HubState()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.state = self.state
        self._thread = threading.Thread(target=self._server.serve_forever, name="hub-stub", daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> "HubStub":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def repo(self, repo_id: str) -> Repo:
        return self.state.repos[repo_id]

    def files(self, repo_id: str, rev: str = "main") -> dict[str, bytes]:
        c = self.state.repos[repo_id].resolve(rev)
        assert c is not None
        return {p: f.data for p, f in c.files.items()}
