"""A recall run decided before any call: the settings that apply to a prompt, its sizes, the hash
that names a complete result and each trial's random source (:mod:`.prompt`); the calls, tokens
and dollars a compared run will spend (:mod:`.cost`, ``needle plan``)."""
