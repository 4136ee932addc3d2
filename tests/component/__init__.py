"""Component tests: the stores, handlers, sources and the local runtime on moto, stand-in
servers on 127.0.0.1 and the `trunkwatch` command in a subprocess (`make component`)."""
