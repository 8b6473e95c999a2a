"""Stage 0: the smallest Core API program. Runs the same with `python 0_start.py` or as an experiment."""

import logging

import determined as det


def main(core_context: det.core.Context) -> None:
    where = "on a det cluster" if core_context.info else "off-cluster"
    logging.info("hello from the Core API, running %s", where)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
    with det.core.init() as core_context:
        main(core_context)
