"""``python native_driver.py CONTEXT_DIR MODULE:Class CONFIG_JSON MODE [test]``: a user's script that
hands a Trial class to ``det.experimental.create``; it prints ``AFTER CREATE`` if create returns."""

from __future__ import annotations

import importlib
import json
import logging
import sys

import determined as det

if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
    context_dir, spec, config, mode = sys.argv[1:5]
    sys.path.insert(0, context_dir)
    module_name, class_name = spec.split(":")
    trial_class = getattr(importlib.import_module(module_name), class_name)
    det.experimental.create(
        trial_class,
        json.loads(config),
        mode=mode,
        context_dir=context_dir,
        test="test" in sys.argv[5:],
    )
    print("AFTER CREATE", flush=True)
