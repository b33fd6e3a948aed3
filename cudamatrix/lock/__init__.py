"""The lock feature: a solved set resolved to its complete closure of files through the installer
(:mod:`.resolve`, :mod:`.closure`), written as requirements.txt and a uv project (:mod:`.lockfile`)
or a PEP 751 pylock.toml (:mod:`.pylock`), all through one TOML writer (:mod:`.toml`)."""
