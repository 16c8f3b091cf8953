"""The embedded model (Gemma 3 270M through llama-cpp-python): no key, no network, reproducible.

:class:`.provider.LocalProvider` is the provider; the model runs in a worker process needle owns
(:mod:`.worker` the parent's side, :mod:`.serve` the worker's entry point, :mod:`.infer`,
:mod:`.decode` and :mod:`.kv_reuse` inside it), so a native crash cannot take a run down. The
GGUF file (:mod:`.model`), its first-use self-test (:mod:`.probe`), the build's CPU features
(:mod:`.build`) and the prompt text (:mod:`.text`) are its parts."""
