"""One recall trial inside the user's own request: the needle and its question (:mod:`.needles`,
:mod:`.probes`), the filler around it (:mod:`.filler`, :mod:`.sizing`), the context and question
slots (:mod:`.slot`), where facts go (:mod:`.placement`), the haystack built to a size and depth
(:mod:`.haystack`, :mod:`.gold_hay`), and the answer scored (:mod:`.scoring`)."""
