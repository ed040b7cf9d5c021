"""Regenerate names.json, the public names of PyFlink's DataStream modules. Run by hand, not by the suite:

    python3.11 -m venv /tmp/pyflink-venv && /tmp/pyflink-venv/bin/pip install apache-flink==2.3.0
    /tmp/pyflink-venv/bin/python tests/golden/pyflink_api/generate.py

A module's public names are its `__all__` (what `from pyflink.x import *` gives, PyFlink's own
declaration of its API). tests/unit/api/test_api_surface.py checks each is at the same path under
runtime.api, or on its list of names left out on purpose.
"""
from __future__ import annotations

import importlib
import json
import sys
from importlib.metadata import version
from pathlib import Path

MODULES = [
    "pyflink.common",
    "pyflink.datastream",
    "pyflink.datastream.functions",
    "pyflink.datastream.window",
    "pyflink.datastream.state",
    "pyflink.datastream.connectors",
    "pyflink.datastream.connectors.file_system",
]


def main() -> None:
    if version("apache-flink") != "2.3.0":
        sys.exit(f"names.json is PyFlink 2.3.0's; this is apache-flink {version('apache-flink')}")
    names = {module: sorted(importlib.import_module(module).__all__) for module in MODULES}
    out = Path(__file__).with_name("names.json")
    out.write_text(json.dumps({"apache-flink": "2.3.0", "modules": names}, indent=1) + "\n")
    print(f"wrote {sum(map(len, names.values()))} names of {len(names)} modules to {out}")


if __name__ == "__main__":
    main()
