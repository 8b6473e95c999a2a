#!/usr/bin/env bash
# Run upstream Determined 0.38.1's own end-to-end tests (`pytest -m e2e_cpu`, tests/experiment and
# tests/cluster, one file at a time) against a fresh det-master with 1 CPU slot (upstream's e2e_cpu
# cluster: one agent, one CPU slot; its tests count on it), with upstream's `det`
# CLI and SDK (determined==0.38.1 from PyPI, in a venv of its own under .cache/) on PATH, and print
# pass/fail/skip counts per file. Run by hand: CI has no copy of Determined (docs/compatibility.md,
# "Upstream end-to-end tests", keeps the latest output and the reason for every test det does not pass).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
UPSTREAM_VENV="${UPSTREAM_E2E_VENV:-$ROOT/.cache/upstream-e2e-0.38.1}"
MASTER_BIN="${DET_MASTER_BIN:-$ROOT/.venv/bin/det-master}"
PYTHON="${PYTHON:-python3}"
FILE_TIMEOUT=1800
TEST_TIMEOUT=600
SLOTS=1
PASSWORD="E2e-Upstream-Pw1"
KEXPR=""
LOGS=""

usage() {
    cat <<'EOF'
usage: tools/upstream_e2e.sh [options] DETERMINED_CHECKOUT [TEST_FILE...]

Runs upstream Determined's e2e_tests (`pytest -m e2e_cpu`) file by file against a fresh det-master
(1 slot as upstream's e2e_cpu cluster, a new data dir per file) with upstream's det CLI/SDK (determined==0.38.1) on PATH, and prints
pass/fail/skip counts per file.

DETERMINED_CHECKOUT  a checkout of determined-ai/determined at 0.38.1 (needs e2e_tests/ and examples/),
                     e.g. git archive 0.38.1 e2e_tests examples | tar -x -C /tmp/det-upstream
TEST_FILE            files relative to e2e_tests/ (default: every file under tests/experiment and
                     tests/cluster with an e2e_cpu test)

options:
  -k EXPR              only tests matching EXPR (pytest -k)
  --slots N            the master's CPU slots (default 1, as upstream's e2e_cpu cluster)
  --file-timeout S     seconds one file may run (default 1800)
  --test-timeout S     seconds one test may run (pytest-timeout; default 600)
  --logs DIR           where the master and pytest logs go (default .cache/upstream-e2e-runs/DATE)
  -h, --help           this text

environment: UPSTREAM_E2E_VENV (the upstream client venv, built on first use), DET_MASTER_BIN
(default .venv/bin/det-master), PYTHON (builds the venv; default python3).
EOF
}

die() {
    echo "upstream_e2e.sh: $*" >&2
    echo "try: tools/upstream_e2e.sh --help" >&2
    exit 2
}

CHECKOUT=""
FILES=()
while [ $# -gt 0 ]; do
    case "$1" in
        -h | --help) usage; exit 0 ;;
        -k) [ $# -ge 2 ] || die "-k needs an expression"; KEXPR="$2"; shift 2 ;;
        --slots) [ $# -ge 2 ] || die "--slots needs a number"; SLOTS="$2"; shift 2 ;;
        --file-timeout) [ $# -ge 2 ] || die "--file-timeout needs seconds"; FILE_TIMEOUT="$2"; shift 2 ;;
        --test-timeout) [ $# -ge 2 ] || die "--test-timeout needs seconds"; TEST_TIMEOUT="$2"; shift 2 ;;
        --logs) [ $# -ge 2 ] || die "--logs needs a directory"; LOGS="$2"; shift 2 ;;
        -*) die "unknown option $1" ;;
        *)
            if [ -z "$CHECKOUT" ]; then CHECKOUT="$1"; else FILES+=("$1"); fi
            shift
            ;;
    esac
done
[ -n "$CHECKOUT" ] || die "missing DETERMINED_CHECKOUT (a checkout of determined-ai/determined 0.38.1)"
[[ "$SLOTS" =~ ^[1-9][0-9]*$ ]] || die "--slots must be a positive whole number"
[[ "$FILE_TIMEOUT" =~ ^[0-9]+$ ]] || die "--file-timeout must be a whole number of seconds"
[[ "$TEST_TIMEOUT" =~ ^[0-9]+$ ]] || die "--test-timeout must be a whole number of seconds"
E2E="$(cd "$CHECKOUT" 2>/dev/null && pwd)/e2e_tests" || die "no such directory: $CHECKOUT"
[ -f "$E2E/tests/conftest.py" ] || die "$CHECKOUT has no e2e_tests/tests/conftest.py (not a Determined checkout?)"
[ -d "$CHECKOUT/examples" ] || die "$CHECKOUT has no examples/ (upstream's e2e tests use it)"
[ -x "$MASTER_BIN" ] || die "no det-master at $MASTER_BIN (make install, or set DET_MASTER_BIN)"
for f in "${FILES[@]}"; do
    [ -f "$E2E/$f" ] || die "no test file e2e_tests/$f in $CHECKOUT"
done

# The upstream client venv: determined==0.38.1 and what e2e_tests imports (kubernetes so that
# tests/cluster collects, docker/boto3 for the conftest's imports), plus the CPU build of torch and
# tensorboard that tests/experiment/test_unmanaged.py's scripts (run on the client) import. Only the
# CPU torch wheel is accepted (`+cpu`): without it those tests fail, nothing else does.
# Versions pinned where pip otherwise backtracks for the better part of an hour (kubernetes,
# botocore and google-api-core disagree on python-dateutil and requests; kubernetes 37 wants
# python-dateutil>=3, which botocore refuses): a set that resolves at once (`pip check` clean).
RESOLVED=(kubernetes==31.0.0 python-dateutil==2.9.0.post0 boto3==1.44.8 botocore==1.44.8
    google-api-core==2.30.3 google-cloud-storage==3.17.1 requests==2.31.0)
if [ ! -f "$UPSTREAM_VENV/.complete" ]; then
    echo "building the upstream client venv $UPSTREAM_VENV (once)"
    "$PYTHON" -m venv --clear "$UPSTREAM_VENV"
    "$UPSTREAM_VENV/bin/pip" install -q --disable-pip-version-check \
        determined==0.38.1 pytest==9.2.0 pytest-timeout==2.4.0 pandas pyyaml docker appdirs \
        "numpy>=2" "matplotlib>=3.8" "${RESOLVED[@]}"
    "$UPSTREAM_VENV/bin/pip" install -q --disable-pip-version-check "torch==2.13.0+cpu" \
        tensorboard==2.21.0 || echo "no CPU torch wheel here: tests/experiment/test_unmanaged.py will fail"
    touch "$UPSTREAM_VENV/.complete"
fi
# Ray on the client: tests/experiment/test_unmanaged.py's hp search starts a Ray cluster and runs
# Ray Tune on it, tests/cluster/test_proxy.py submits Ray jobs through a tunnel (`ray job submit`).
# The version det's environment pins (requirements/main.txt), with the dashboard/job server and
# Tune; a marker file per version, so that an existing venv gets it once.
RAY_PIN="$(grep -E '^ray==' "$ROOT/requirements/main.txt" || true)"
if [ -n "$RAY_PIN" ] && [ ! -f "$UPSTREAM_VENV/.$RAY_PIN" ]; then
    echo "installing ${RAY_PIN} into the upstream client venv"
    # torch stays as it is (pip must not replace the CPU build), and requests within determined
    # 0.38.1's own bound (<2.32; Ray's opencensus would otherwise pull a newer google-api-core
    # that wants requests>=2.33).
    keep=("ray[default,tune]${RAY_PIN#ray}" "requests<2.32")
    torch_version="$("$UPSTREAM_VENV/bin/python" -c 'import torch; print(torch.__version__)' 2>/dev/null || true)"
    [ -z "$torch_version" ] || keep+=("torch==$torch_version")
    if "$UPSTREAM_VENV/bin/pip" install -q --disable-pip-version-check "${keep[@]}"; then
        touch "$UPSTREAM_VENV/.$RAY_PIN"
    else
        echo "no ${RAY_PIN} here: test_unmanaged_ray_hp_search and the Ray tests of test_proxy.py will fail"
    fi
fi

if [ ${#FILES[@]} -eq 0 ]; then
    mapfile -t FILES < <(cd "$E2E" && grep -l -E "pytest\.mark\.e2e_cpu([^_a-z0-9]|$)" \
        tests/experiment/test_*.py tests/cluster/test_*.py | sort)
    # test_ship_logs.py tests upstream's in-container log shipper (master/static/srv/ship_logs.py)
    # against a fake server: no master is involved. It needs that file of the checkout.
    if [ ! -f "$CHECKOUT/master/static/srv/ship_logs.py" ]; then
        echo "skipping tests/cluster/test_ship_logs.py: $CHECKOUT has no master/static/srv/ship_logs.py"
        mapfile -t FILES < <(printf '%s\n' "${FILES[@]}" | grep -v '^tests/cluster/test_ship_logs.py$')
    fi
fi

LOGS="${LOGS:-$ROOT/.cache/upstream-e2e-runs/$(date -u +%Y%m%dT%H%M%SZ)}"
mkdir -p "$LOGS"
LOGS="$(cd "$LOGS" && pwd)"
MASTER_PID=""

# The tasks' environment. A trial's python3 and pip are those of the master's interpreter, and
# upstream's examples install packages from their startup-hook.sh (examples/features/ports, which
# test_proxy.py runs, installs pydantic<2, ray[air]==2.9.3 and pandas==1.5.3): that must never
# change the environment det-master comes from. So det-master runs with the interpreter of a venv
# of its own, under the run's logs, that sees the master's packages through a .pth file (det and
# its frameworks import as usual) and takes whatever a task installs (pip leaves packages outside
# its environment alone). It is rebuilt before a file when a task of an earlier file installed
# something into it.
MASTER_PY="$(dirname "$MASTER_BIN")/python"
[ -x "$MASTER_PY" ] || die "no python beside $MASTER_BIN (DET_MASTER_BIN must be a venv's det-master)"
TASK_ENV="$LOGS/task-env"
TASK_ENV_CLEAN=""
task_env() {
    local site master_site
    if [ -n "$TASK_ENV_CLEAN" ] && [ "$(ls -A "$TASK_ENV/lib"/python*/site-packages)" = "$TASK_ENV_CLEAN" ]; then
        return 0
    fi
    rm -rf "$TASK_ENV"
    "$MASTER_PY" -m venv "$TASK_ENV" || return 1
    site="$("$TASK_ENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
    master_site="$("$MASTER_PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
    printf 'import site; site.addsitedir(%s)\n' "'$master_site'" >"$site/_det_master_env.pth"
    TASK_ENV_CLEAN="$(ls -A "$site")"
}

stop_master() {
    if [ -n "$MASTER_PID" ] && kill -0 "$MASTER_PID" 2>/dev/null; then
        kill -TERM "$MASTER_PID" 2>/dev/null || true
        for _ in $(seq 1 100); do kill -0 "$MASTER_PID" 2>/dev/null || break; sleep 0.2; done
        kill -KILL "$MASTER_PID" 2>/dev/null || true
        wait "$MASTER_PID" 2>/dev/null || true
    fi
    MASTER_PID=""
}
trap stop_master EXIT INT TERM

free_port() {
    "$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# One master per file: a fresh data dir (SQLite, checkpoints, logs) and a port of its own.
start_master() {
    local name="$1" port="$2"
    local data="$LOGS/$name.data"
    rm -rf "$data"
    mkdir -p "$data"
    # Upstream's e2e_cpu cluster is the open-source master: basic authorization, no RBAC.
    # Its rbac_ui_enabled (as double.devcluster.yaml) lets upstream's `det user-group`/`det rbac` run.
    printf 'security:\n  authz:\n    type: basic\n    rbac_ui_enabled: true\n' >"$data.yaml"
    # Its default pool's task_container_defaults set an environment variable, as double.devcluster.yaml
    # does for test_resource_pools.py.
    printf 'resource_pools:\n  - pool_name: default\n    task_container_defaults:\n' >>"$data.yaml"
    printf '      environment_variables:\n        - SOMEVAR=SOMEVAL\n' >>"$data.yaml"
    task_env || { echo "could not build the task environment $TASK_ENV" >&2; return 1; }
    (cd "$data" && exec "$TASK_ENV/bin/python" "$MASTER_BIN" up --config-file "$data.yaml" --port "$port" --slots "$SLOTS" \
        --data-dir "$data" --initial-admin-password "$PASSWORD") >"$LOGS/$name.master.log" 2>&1 &
    MASTER_PID=$!
    for _ in $(seq 1 300); do
        if "$PYTHON" -c "import urllib.request as u; u.urlopen('http://127.0.0.1:$port/api/v1/master', timeout=2)" \
            2>/dev/null; then
            return 0
        fi
        kill -0 "$MASTER_PID" 2>/dev/null || break
        sleep 0.5
    done
    echo "det-master did not come up for $name; see $LOGS/$name.master.log" >&2
    return 1
}

# pass / fail / skip out of a junit XML file (errors count as failures).
count() {
    "$PYTHON" - "$1" <<'EOF'
import sys
import xml.etree.ElementTree as ET

try:
    root = ET.parse(sys.argv[1]).getroot()
except (OSError, ET.ParseError):
    print("0 0 0 0")
    raise SystemExit
passed = failed = skipped = 0
for case in root.iter("testcase"):
    tags = {child.tag for child in case}
    if tags & {"failure", "error"}:
        failed += 1
    elif "skipped" in tags:
        skipped += 1
    else:
        passed += 1
print(passed, failed, skipped, passed + failed + skipped)
EOF
}

UP_ENV=(env -u VIRTUAL_ENV -u PYTHONPATH -u PYTHONHOME -u DET_MASTER -u DET_USER -u DET_USER_TOKEN
    "PATH=$UPSTREAM_VENV/bin:$PATH" "HOME=$LOGS/home" "XDG_CONFIG_HOME=$LOGS/home/.config"
    "INITIAL_USER_PASSWORD=$PASSWORD" "DET_TEST_GPU_ENABLED=0")
mkdir -p "$LOGS/home"
# `ray stop` (the end of test_unmanaged.py's Ray test) stops every Ray process of the user on the
# machine. Where the system allows it, each file's pytest runs in a PID namespace of its own, under
# a bash that reaps orphans: `ray stop` sees and stops only the Ray cluster the test started, and
# whatever a file leaves running ends with it.
ISOLATE=()
if unshare --pid --fork --kill-child --mount-proc true 2>/dev/null; then
    ISOLATE=(unshare --pid --fork --kill-child --mount-proc bash -c '"$@" & wait $!' isolated)
fi

echo "upstream e2e: $E2E against $MASTER_BIN ($SLOTS slots); logs in $LOGS"
TABLE="$LOGS/summary.txt"
printf '%-44s %6s %6s %6s %7s\n' file passed failed skipped seconds | tee "$TABLE"
TP=0 TF=0 TS=0
for f in "${FILES[@]}"; do
    name="$(echo "${f%.py}" | tr '/' '_')"
    port="$(free_port)"
    start=$SECONDS
    if start_master "$name" "$port"; then
        args=(-m e2e_cpu "$f" --master-port "$port" --master-host 127.0.0.1 --no-compare-stats
            -p no:cacheprovider --timeout "$TEST_TIMEOUT" -o junit_logging=no
            --junitxml "$LOGS/$name.xml" -rfEs)
        [ -z "$KEXPR" ] || args+=(-k "$KEXPR")
        # The agents are det-master's own: they report det's version (upstream's cross-version setting).
        version="$("$PYTHON" -c "import json, urllib.request as u
print(json.load(u.urlopen('http://127.0.0.1:$port/api/v1/master', timeout=10))['version'])")"
        (cd "$E2E" && timeout -k 30 "$FILE_TIMEOUT" ${ISOLATE[@]+"${ISOLATE[@]}"} "${UP_ENV[@]}" "DET_AGENT_VERSION=$version" \
            "$UPSTREAM_VENV/bin/python" -m pytest "${args[@]}") >"$LOGS/$name.pytest.log" 2>&1 || true
    fi
    stop_master
    read -r p fl s _ <<<"$(count "$LOGS/$name.xml")"
    TP=$((TP + p)) TF=$((TF + fl)) TS=$((TS + s))
    printf '%-44s %6d %6d %6d %7d\n' "$f" "$p" "$fl" "$s" $((SECONDS - start)) | tee -a "$TABLE"
done
printf '%-44s %6d %6d %6d\n' total "$TP" "$TF" "$TS" | tee -a "$TABLE"
echo "per-test results: $LOGS/*.pytest.log (the short summary at the end of each)"
[ "$TF" -eq 0 ]
