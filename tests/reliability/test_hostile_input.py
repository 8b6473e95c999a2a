"""Hostile input against a real det-master: each is a 4xx naming the problem, the master keeps
serving, and nothing else changes (every table's row count is the same before and after).

- context archives (the experiment body's ``modelDefinition``): ``..`` entries, absolute paths,
  NUL bytes, symlinks, hard links, device files and FIFOs, duplicates, bad base64, a context over
  ``limits.max_context_bytes``, a gzip bomb as a request body; and the extraction of a stored
  archive (a tar bomb, links, escaping names) never writing outside its directory or past its bound;
- metric values: NaN/Infinity (stored, read back as upstream's strings), huge strings, deep
  nesting, 64-bit overflows;
- malformed YAML: syntax errors, wrong types, unknown keys, Python tags, alias bombs ("billion
  laughs"), recursive aliases, nesting past the parser's recursion, documents over the body limit;
- the CLI packing a context directory with symlinks (``det e create``): links are shipped as the
  files they point at inside the context, never as links, and links out of it are left out.
"""

from __future__ import annotations

import base64
import gzip
import io
import os
import pathlib
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from typing import Any

import pytest
import requests
import sqlalchemy
import yaml

from determined.client import Client, MasterClient

CONTEXT_LIMIT = 1024 * 1024
BODY_LIMIT = 8 * 1024 * 1024
CONFIG = {
    "name": "hostile",
    "entrypoint": "python3 train.py",
    "searcher": {"name": "single", "metric": "loss", "max_length": 1},
}
TRAIN = base64.b64encode(b"print('hi')\n").decode()

SYMLINK, HARDLINK, CHAR_DEVICE, BLOCK_DEVICE, FIFO = (ord(c) for c in "21346")


@pytest.fixture(scope="module")
def hostile(make_module_master: Any) -> Any:
    """One slot, small context and body limits (R1's ``limits`` keys), so big inputs stay cheap."""
    return make_module_master(
        slots=1,
        limits={"max_context_bytes": CONTEXT_LIMIT, "max_request_body_bytes": BODY_LIMIT},
    )


@pytest.fixture(scope="module")
def http(hostile: Any) -> requests.Session:
    """The non-admin user's HTTP session (a hostile user needs no admin)."""
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {hostile.login('determined')}"
    return session


@pytest.fixture(scope="module")
def trial(hostile: Any) -> tuple[int, int]:
    """(trial id, trial run id) of the non-admin user's unmanaged trial, for metric reports."""
    session = hostile.session("determined")
    client = Client(session)
    config = {"name": "hostile-metrics", "searcher": {"name": "single", "metric": "loss"}}
    exp_id = client.experiments.create_unmanaged(yaml.safe_dump(config))["experiment"]["id"]
    trial_id = client.trials.create_unmanaged(exp_id, {})["trial"]["id"]
    run = client.trials.start_unmanaged(trial_id, resume=False)
    MasterClient(session).report_trial_metrics(
        trial_id, int(run["trialRunId"]), "training", {"loss": 1.0}, steps_completed=1
    )
    return int(trial_id), int(run["trialRunId"])


def _row_counts(master: Any) -> dict[str, int]:
    """Rows of every table but the login sessions' (a login adds one)."""
    engine = master.db.engine
    counts = {}
    with engine.connect() as connection:
        for table in sqlalchemy.inspect(engine).get_table_names():
            if "session" not in table:
                query = sqlalchemy.text(f'SELECT COUNT(*) FROM "{table}"')
                counts[table] = int(connection.execute(query).scalar_one())
    return counts


@pytest.fixture
def unchanged(hostile: Any, http: requests.Session, trial: tuple[int, int]) -> Iterator[None]:
    """The test's hostile requests change no row, and the master still answers afterwards."""
    before = _row_counts(hostile)
    yield
    assert _row_counts(hostile) == before
    assert http.get(f"{hostile.url}/api/v1/master", timeout=30).status_code == 200
    assert http.get(f"{hostile.url}/api/v1/experiments", timeout=30).status_code == 200


def _refused(response: requests.Response, *words: str, status: int = 400) -> str:
    """The error message of a 4xx answer, checked to name each of ``words``."""
    assert response.status_code == status, (response.status_code, response.text[:500])
    message = str(response.json()["error"]["error"])
    for word in words:
        assert word.lower() in message.lower(), (word, message)
    return message


def _create(hostile: Any, http: requests.Session, files: list[dict[str, Any]]) -> Any:
    body = {"config": yaml.safe_dump(CONFIG), "modelDefinition": files, "activate": False}
    return http.post(f"{hostile.url}/api/v1/experiments", json=body, timeout=60)


def _entry(path: str, kind: int = ord("0"), content: str = TRAIN) -> dict[str, Any]:
    return {"path": path, "type": kind, "content": content, "mtime": 0, "mode": 0o644}


@pytest.mark.parametrize(
    ("entry", "words"),
    [
        (_entry("../escape.py"), ["..", "leaves"]),
        (_entry("pkg/../../escape.py"), [".."]),
        (_entry("/etc/cron.d/evil"), ["absolute"]),
        (_entry("C:\\evil.py"), ["absolute"]),
        (_entry("evil\x00.py"), ["NUL"]),
        (_entry("link.py", SYMLINK), ["type 50", "only regular files"]),
        (_entry("hard.py", HARDLINK), ["type 49"]),
        (_entry("tty", CHAR_DEVICE), ["type 51"]),
        (_entry("disk", BLOCK_DEVICE), ["type 52"]),
        (_entry("pipe", FIFO), ["type 54"]),
        (_entry("bad.py", content="%%% not base64 %%%"), ["base64"]),
        (_entry("", ord("0")), ["non-empty"]),
    ],
)
@pytest.mark.usefixtures("unchanged")
def test_hostile_context_entries(
    hostile: Any, http: requests.Session, entry: dict[str, Any], words: list[str]
) -> None:
    response = _create(hostile, http, [_entry("train.py"), entry])
    _refused(response, "modelDefinition", *words)


@pytest.mark.usefixtures("unchanged")
def test_duplicate_and_oversized_contexts(hostile: Any, http: requests.Session) -> None:
    _refused(_create(hostile, http, [_entry("a.py"), _entry("a.py")]), "duplicate")
    chunk = base64.b64encode(os.urandom(CONTEXT_LIMIT // 3)).decode()
    files = [_entry(f"data{i}.bin", content=chunk) for i in range(4)]
    _refused(_create(hostile, http, files), "limits.max_context_bytes")


@pytest.mark.usefixtures("unchanged")
def test_compressed_body_bomb_is_not_expanded(hostile: Any, http: requests.Session) -> None:
    """A 200 KB gzip body that would expand to 200 MB: the master does not inflate request
    bodies, so it is malformed JSON (400), at no cost."""
    bomb = gzip.compress(b'{"config": "' + b" " * (200 * 1024 * 1024) + b'"}', compresslevel=9)
    assert len(bomb) < 1024 * 1024
    response = http.post(
        f"{hostile.url}/api/v1/experiments",
        data=bomb,
        headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
        timeout=60,
    )
    _refused(response, "malformed JSON")


def test_a_plain_context_is_still_accepted(hostile: Any, http: requests.Session) -> None:
    """The control: the same request with an ordinary context creates a (paused) experiment."""
    response = _create(hostile, http, [_entry("pkg", ord("5"), ""), _entry("pkg/train.py")])
    assert response.status_code == 200, response.text
    exp_id = response.json()["experiment"]["id"]
    model_def = http.get(f"{hostile.url}/api/v1/experiments/{exp_id}/model_def", timeout=30)
    with tarfile.open(fileobj=io.BytesIO(base64.b64decode(model_def.json()["b64Tgz"]))) as tar:
        assert sorted(tar.getnames()) == ["pkg", "pkg/train.py"]


def _tar_gz(members: list[tuple[tarfile.TarInfo, bytes | None]]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=9) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buffer.getvalue()


def _info(name: str, kind: bytes = tarfile.REGTYPE, size: int = 0, link: str = "") -> Any:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.size = size
    info.linkname = link
    return info


class _Zeros(io.RawIOBase):
    """``size`` zero bytes, produced lazily (a tar bomb's payload without holding it)."""

    def __init__(self, size: int) -> None:
        self.left = size

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = min(len(buffer), self.left)
        buffer[:n] = bytes(n)
        self.left -= n
        return n


def test_extraction_refuses_bombs_links_and_escapes(tmp_path: pathlib.Path) -> None:
    """The last line of defence, where a stored context is unpacked into a trial's work dir:
    a tar bomb stops at the bound before filling the disk, and no link, device or escaping name
    is ever written, inside the directory or outside it."""
    from determined.master._core._context import ContextError, extract

    bomb_size = 256 * 1024 * 1024
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=1) as tar:
        tar.addfile(_info("zeros.bin", size=bomb_size), _Zeros(bomb_size))
    bomb = buffer.getvalue()
    assert len(bomb) < bomb_size // 100
    work = tmp_path / "bomb"
    with pytest.raises(ContextError, match="expands past"):
        extract(bomb, work, max_bytes=CONTEXT_LIMIT)
    assert sum(f.stat().st_size for f in work.rglob("*") if f.is_file()) <= CONTEXT_LIMIT

    outside = tmp_path / "outside.txt"
    hostile_members = [
        (_info("../outside.txt", size=4), b"evil"),
        (_info(str(outside), size=4), b"evil"),
        (_info("link", tarfile.SYMTYPE, link=str(outside)), None),
        (_info("hard", tarfile.LNKTYPE, link="train.py"), None),
        (_info("tty", tarfile.CHRTYPE), None),
        (_info("pipe", tarfile.FIFOTYPE), None),
    ]
    for index, member in enumerate(hostile_members):
        work = tmp_path / f"work{index}"
        archive = _tar_gz([(_info("train.py", size=3), b"ok\n"), member])
        with pytest.raises(ContextError):
            extract(archive, work)
        assert not outside.exists()
        assert all(p.is_file() and not p.is_symlink() for p in work.rglob("*"))
    ok = tmp_path / "ok"
    extract(
        _tar_gz([(_info("pkg", tarfile.DIRTYPE), None), (_info("pkg/a.py", size=2), b"a\n")]), ok
    )
    assert (ok / "pkg" / "a.py").read_text() == "a\n"


def _report(http: requests.Session, url: str, trial: tuple[int, int], raw: str) -> Any:
    trial_id, run_id = trial
    body = (
        f'{{"group": "training", "metrics": {{"trialId": {trial_id}, "trialRunId": {run_id},'
        f' "stepsCompleted": 5, "metrics": {{"avgMetrics": {raw}}}}}}}'
    )
    return http.post(
        f"{url}/api/v1/trials/{trial_id}/metrics",
        data=body,
        headers={"Content-Type": "application/json"},
        timeout=60,
    )


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        ('{"loss": "' + "x" * 200_000 + '"}', ["avgMetrics.loss", "string"]),
        ('{"loss": ' + '{"a": ' * 100 + "1" + "}" * 100 + "}", ["avgMetrics.loss", "nested"]),
        ('{"loss": [' + ",".join(["1"] * 20_000) + "]}", ["avgMetrics.loss", "values"]),
        # NaN sends the body through the standard library's parser, which keeps big integers
        ('{"loss": NaN, "n": 123456789012345678901234567890}', ["avgMetrics.n", "64 bits"]),
        ('{"loss": ' + "[" * 5000 + "]" * 5000 + "}", ["nested too deeply"]),
    ],
)
@pytest.mark.usefixtures("unchanged")
def test_hostile_metric_values(
    hostile: Any, http: requests.Session, trial: tuple[int, int], raw: str, words: list[str]
) -> None:
    _refused(_report(http, hostile.url, trial, raw), *words)


@pytest.mark.usefixtures("unchanged")
def test_hostile_report_counters(
    hostile: Any, http: requests.Session, trial: tuple[int, int]
) -> None:
    trial_id, run_id = trial
    url = f"{hostile.url}/api/v1/trials/{trial_id}/metrics"
    for steps, words in [(10**30, ["64 bits"]), ("1e400", ["stepsCompleted"])]:
        body = {
            "group": "training",
            "metrics": {"trialRunId": run_id, "stepsCompleted": steps, "metrics": {}},
        }
        _refused(http.post(url, json=body, timeout=30), *words)
    body = {"group": "training", "metrics": {"trialRunId": run_id, "metrics": {"batchMetrics": 5}}}
    _refused(http.post(url, json=body, timeout=30), "batchMetrics")


def test_nan_and_infinity_are_stored_and_read_back(
    hostile: Any, http: requests.Session, trial: tuple[int, int]
) -> None:
    """A diverging loss is a legitimate result, not an attack: NaN and +-Infinity (the literals
    Python's json module writes) are stored and read back as upstream's "NaN"/"Infinity"."""
    trial_id, run_id = trial
    body = (
        f'{{"group": "validation", "metrics": {{"trialId": {trial_id}, "trialRunId": {run_id},'
        ' "stepsCompleted": 7, "metrics": {"avgMetrics":'
        ' {"loss": NaN, "up": Infinity, "down": -Infinity, "big": 1.5e308}}}}'
    )
    response = http.post(
        f"{hostile.url}/api/v1/trials/{trial_id}/metrics",
        data=body,
        headers={"Content-Type": "application/json"},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    read = http.get(
        f"{hostile.url}/api/v1/trials/metrics/validation_metrics",
        params={"trialIds": trial_id},
        timeout=30,
    )
    assert read.status_code == 200, read.text
    (row,) = read.json()["result"]["metrics"]
    stored = row["metrics"]["validation_metrics"]
    assert stored == {"loss": "NaN", "up": "Infinity", "down": "-Infinity", "big": 1.5e308}
    for path in (f"/api/v1/trials/{trial_id}", f"/ui/api/trials/{trial_id}/metrics"):
        assert http.get(hostile.url + path, timeout=30).status_code == 200


def _laughs(levels: int = 9) -> str:
    """The "billion laughs" document: each anchor is nine aliases of the previous one."""
    lines = ["data:", "  l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for i in range(1, levels + 1):
        lines.append(f"  l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


BASE = yaml.safe_dump(CONFIG)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("name: [unclosed\n", ["config", "invalid YAML"]),
        ("searcher: 5\nentrypoint: 3\n", ["searcher: must be a mapping", "entrypoint"]),
        (BASE + "no_such_field: 1\n", ["no_such_field", "unknown field"]),
        (BASE + "resources: {slots_per_trial: lots}\n", ["slots_per_trial"]),
        ("!!python/object/apply:os.system ['true']\n", ["invalid YAML", "python/object"]),
        (BASE + _laughs(), ["config", "alias bomb"]),
        (BASE + "data: &loop [*loop]\n", ["config", "alias refers to a node that contains it"]),
        ("data: " + "[" * 5000 + "]" * 5000 + "\n", ["config", "nested too deeply"]),
        ("- just\n- a list\n", ["config", "mapping"]),
        ("", ["config", "required"]),
    ],
)
@pytest.mark.usefixtures("unchanged")
def test_malformed_experiment_yaml(
    hostile: Any, http: requests.Session, text: str, words: list[str]
) -> None:
    body = {"config": text, "modelDefinition": [_entry("train.py")], "activate": False}
    _refused(http.post(f"{hostile.url}/api/v1/experiments", json=body, timeout=60), *words)


@pytest.mark.usefixtures("unchanged")
def test_yaml_bombs_on_every_yaml_route(hostile: Any, http: requests.Session) -> None:
    """The searcher preview, unmanaged experiments and continue's override parse YAML text too:
    the same alias bomb is refused on each (templates take a JSON object, never YAML text)."""
    url = hostile.url
    bomb = BASE + _laughs()
    _refused(http.post(f"{url}/api/v1/preview-hp-search", json={"config": bomb}), "alias bomb")
    body = {"config": bomb, "unmanaged": True}
    _refused(http.post(f"{url}/api/v1/experiments", json=body, timeout=60), "alias bomb")
    template = {"name": "bomb", "config": bomb, "workspaceId": 1}
    response = http.post(f"{url}/api/v1/templates/bomb", json=template, timeout=60)
    _refused(response, "config: must be an object")  # templates take JSON, which has no aliases
    body = {"id": 1, "overrideConfig": _laughs()}
    response = http.post(f"{url}/api/v1/experiments/continue", json=body, timeout=60)
    _refused(response, "overrideConfig", "alias bomb")


@pytest.mark.usefixtures("unchanged")
def test_huge_yaml_document_over_the_body_limit(hostile: Any, http: requests.Session) -> None:
    filler = "".join(f"  k{i}: {'v' * 100}\n" for i in range(BODY_LIMIT // 100))
    body = {"config": BASE + "data:\n" + filler, "activate": False}
    response = http.post(f"{hostile.url}/api/v1/experiments", json=body, timeout=120)
    _refused(response, "limits.max_request_body_bytes", status=413)


def test_cli_packs_symlinks_as_upstream(
    hostile: Any, http: requests.Session, tmp_path: pathlib.Path
) -> None:
    """``det e create`` with links in the context: a link to a file inside is shipped as that
    file's content (as upstream's CLI, which reads through links); a link to a file or directory
    outside the context is left out, so a context never carries a link, and never carries what
    sits outside it."""
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "key.txt").write_text("do not ship\n")
    context = tmp_path / "context"
    context.mkdir()
    (context / "train.py").write_text("print('hi')\n")
    (context / "alias.py").symlink_to(context / "train.py")
    (context / "leak.txt").symlink_to(secret / "key.txt")
    (context / "leakdir").symlink_to(secret, target_is_directory=True)
    config = tmp_path / "exp.yaml"
    config.write_text(yaml.safe_dump(CONFIG))
    env = {k: v for k, v in os.environ.items() if not k.startswith("DET_")}
    env.update(
        DET_MASTER=hostile.url,
        DET_USER="determined",
        DET_PASS="",
        DET_CONFIG_DIR=str(tmp_path / "det-config"),
    )
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "determined.cli",
            "e",
            "create",
            str(config),
            str(context),
            "--paused",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    experiments = http.get(
        f"{hostile.url}/api/v1/experiments", params={"orderBy": "ORDER_BY_DESC"}, timeout=30
    )
    exp_id = experiments.json()["experiments"][0]["id"]
    model_def = http.get(f"{hostile.url}/api/v1/experiments/{exp_id}/model_def", timeout=30)
    with tarfile.open(fileobj=io.BytesIO(base64.b64decode(model_def.json()["b64Tgz"]))) as tar:
        members = {m.name: m for m in tar.getmembers()}
        assert set(members) == {"train.py", "alias.py"}
        assert all(m.isfile() for m in members.values())
        alias = tar.extractfile(members["alias.py"])
        assert alias is not None and alias.read() == b"print('hi')\n"
