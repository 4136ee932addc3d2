"""Use cases: what each Lambda does, composed from domain, sources, channels, storage and silences."""
