pytest_plugins = ["conformance.plugin", "pytester"]
