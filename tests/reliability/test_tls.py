"""TLS on the master (issue 26): ``det-master up --tls-cert/--tls-key`` (and ``security.tls`` in the
config file), clients honouring ``DET_MASTER_CERT_FILE`` (a path or ``noverify``) and
``DET_MASTER_CERT_NAME``, trials trusting their master, and the refusal of a non-loopback bind
while an admin has an empty password."""

from __future__ import annotations

import datetime
import ipaddress
import os
import pathlib
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests
import yaml

from determined.client import Session

CERT_NAME = "det-master.test"


def _self_signed(directory: pathlib.Path, *, dns: str, ip: str | None) -> tuple[str, str]:
    """A self-signed certificate for ``dns`` (and ``ip`` when given) and its key, as PEM files."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, dns)])
    names: list[x509.GeneralName] = [x509.DNSName(dns)]
    if ip:
        names.append(x509.IPAddress(ipaddress.ip_address(ip)))
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    directory.mkdir(parents=True, exist_ok=True)
    cert_path = directory / "master.crt"
    key_path = directory / "master.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return str(cert_path), str(key_path)


@pytest.fixture(scope="module")
def named_cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """A certificate for det-master.test only: clients on 127.0.0.1 need DET_MASTER_CERT_NAME."""
    return _self_signed(tmp_path_factory.mktemp("tls-named"), dns=CERT_NAME, ip=None)


@pytest.fixture(scope="module")
def tls_master(make_module_master: Any, named_cert: tuple[str, str]) -> Any:
    cert, key = named_cert
    return make_module_master(tls_cert=cert, tls_key=key)


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.delenv("DET_MASTER_CERT_FILE", raising=False)
    monkeypatch.delenv("DET_MASTER_CERT_NAME", raising=False)
    return monkeypatch


def _info(url: str) -> dict[str, Any]:
    return dict(Session(url, max_retries=1).request("GET", "/api/v1/master"))


def test_clients_verify_the_master_as_the_variables_say(
    tls_master: Any, named_cert: tuple[str, str], env: pytest.MonkeyPatch
) -> None:
    url = tls_master.url
    assert url.startswith("https://127.0.0.1:")
    with pytest.raises(Exception):  # noqa: B017 - an SSL verification error, however wrapped
        _info(url)  # self-signed: the system's roots do not trust it
    env.setenv("DET_MASTER_CERT_FILE", named_cert[0])
    with pytest.raises(Exception):  # noqa: B017
        _info(url)  # trusted, but issued to det-master.test, not 127.0.0.1
    env.setenv("DET_MASTER_CERT_NAME", CERT_NAME)
    assert _info(url)["version"]
    env.delenv("DET_MASTER_CERT_NAME")
    env.setenv("DET_MASTER_CERT_FILE", "noverify")
    assert _info(url)["version"]
    # plain HTTP on the TLS port is not served
    with pytest.raises(requests.RequestException):
        requests.get(url.replace("https://", "http://") + "/api/v1/master", timeout=10).json()


def test_the_cli_honours_the_variables(tls_master: Any, named_cert: tuple[str, str]) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DET_")}
    env.update({"DET_MASTER": tls_master.url, "HOME": str(tls_master.data_dir)})
    argv = [sys.executable, "-m", "determined.cli", "master", "info"]
    refused = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert refused.returncode != 0
    env.update({"DET_MASTER_CERT_FILE": named_cert[0], "DET_MASTER_CERT_NAME": CERT_NAME})
    shown = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert "version" in shown.stdout.lower()


def test_a_trial_reports_to_a_tls_master(
    tls_master: Any, named_cert: tuple[str, str], env: pytest.MonkeyPatch, tmp_path: pathlib.Path
) -> None:
    """The master hands its trials a bundle with its certificate and the name it carries."""
    (tmp_path / "train.py").write_text(
        "import determined as det\n"
        "with det.core.init() as core:\n"
        "    core.train.report_training_metrics(steps_completed=1, metrics={'loss': 1.0})\n"
    )
    env.setenv("DET_MASTER_CERT_FILE", named_cert[0])
    env.setenv("DET_MASTER_CERT_NAME", CERT_NAME)
    api = tls_master.api("admin")
    config = {
        "name": "tls-trial",
        "entrypoint": "python3 train.py",
        "searcher": {"name": "single", "metric": "loss", "max_length": {"batches": 1}},
        "max_restarts": 0,
    }
    exp_id = api.create_experiment(yaml.safe_dump(config), tmp_path)
    state = api.wait_experiment(exp_id, timeout=180)
    assert state.endswith("COMPLETED"), api.debug(exp_id)
    trial = api.trials(exp_id)[0]
    assert [r["metrics"]["avg_metrics"]["loss"] for r in api.metrics(trial["id"], "training")] == [
        1.0
    ]


@pytest.fixture
def master_process(tmp_path: pathlib.Path) -> Iterator[list[subprocess.Popen[str]]]:
    procs: list[subprocess.Popen[str]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()


def _serving_url(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line and proc.poll() is not None:
            raise AssertionError(f"det-master exited with {proc.returncode}")
        if line.startswith("det-master serving on "):
            return line.strip().rsplit(" ", 1)[-1]
    raise AssertionError("det-master did not start")


def test_det_master_up_flags_and_config_file(
    tmp_path: pathlib.Path,
    master_process: list[subprocess.Popen[str]],
    env: pytest.MonkeyPatch,
) -> None:
    """``--tls-cert/--tls-key`` and ``security.tls`` in ``--config-file`` both serve HTTPS."""
    cert, key = _self_signed(tmp_path / "ip", dns="localhost", ip="127.0.0.1")
    config_file = tmp_path / "master.yaml"
    config_file.write_text(
        yaml.safe_dump({"port": 0, "security": {"tls": {"cert": cert, "key": key}}})
    )
    base = [sys.executable, "-m", "determined.master", "up"]
    for n, argv in enumerate(
        (
            ["--port", "0", "--tls-cert", cert, "--tls-key", key],
            ["--config-file", str(config_file)],
        )
    ):
        proc = subprocess.Popen(
            [*base, *argv, "--data-dir", str(tmp_path / f"d{n}")],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        master_process.append(proc)
        url = _serving_url(proc)
        assert url.startswith("https://127.0.0.1:")
        env.setenv("DET_MASTER_CERT_FILE", cert)
        assert _info(url)["version"]
        proc.terminate()
        proc.wait(60)
    missing = subprocess.run(
        [*base, "--tls-cert", cert, "--data-dir", str(tmp_path / "d9")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert missing.returncode != 0 and "--tls-key" in missing.stderr


def test_non_loopback_bind_refused_while_any_admin_has_an_empty_password(
    tmp_path: pathlib.Path,
) -> None:
    """``admin`` got a password, a second admin has none: binding 0.0.0.0 is refused, naming
    that admin and how to set a password; on loopback the master starts."""
    from determined import client
    from determined.master import Master, MasterConfig

    data_dir = str(tmp_path / "d")
    master = Master(MasterConfig(port=0, data_dir=data_dir, initial_admin_password="S3cret-pass"))
    master.start()
    try:
        session = client.login(
            master.url, "admin", "S3cret-pass", store=client.TokenStore(tmp_path / "tokens.json")
        )
        client.Client(session).users.create({"username": "ops", "admin": True, "active": True}, "")
    finally:
        master.stop()
    public = Master(MasterConfig(host="0.0.0.0", port=0, data_dir=data_dir))
    with pytest.raises(RuntimeError) as info:
        public.start()
    public.stop()
    message = str(info.value)
    assert "empty" in message and "ops" in message and "change-password ops" in message
