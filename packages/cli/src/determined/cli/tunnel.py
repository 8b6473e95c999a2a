"""``python -m determined.cli.tunnel``: a TCP tunnel to a proxy port of a trial, as upstream's.

    python -m determined.cli.tunnel --listener 8265 --auth $DET_MASTER <task id>:8265

serves ``localhost:8265``, each connection carried to port 8265 of the trial through the master
(``environment.proxy_ports`` with ``proxy_tcp: true``). Without ``--listener`` the tunnel is this
process's standard input and output (ssh's ``ProxyCommand``). ``--auth`` logs in like ``det``
(``-u``, ``$DET_USER``, the cached login); without it the service must be ``unauthenticated``.
"""

from __future__ import annotations

import argparse
import threading

from determined import client
from determined.cli import _tunnel


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Tunnel through a det master")
    parser.add_argument("master_url", help="the master, e.g. http://127.0.0.1:8080")
    parser.add_argument("service_uuid", help="the service: <task id>:<port>")
    parser.add_argument("--cert-file", help="CA bundle of the master's certificate, or noverify")
    parser.add_argument("--cert-name", help="accepted for upstream's command line; unused")
    parser.add_argument("--listener", type=int, help="serve this local port")
    parser.add_argument("-u", "--user", help="log in as this user (with --auth)")
    parser.add_argument("--auth", action="store_true", help="log in to the master")
    args = parser.parse_args(argv)
    master = client.master_address(args.master_url)
    token = client.login(master, args.user).token if args.auth else None
    cert: str | bool | None = args.cert_file
    if args.listener:
        listener = _tunnel.Listener(args.service_uuid, args.listener)
        with _tunnel.listening(master, token, [listener], cert):
            threading.Event().wait()
    else:
        _tunnel.stdio(master, token, args.service_uuid, cert)


if __name__ == "__main__":
    main()
