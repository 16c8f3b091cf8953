"""Needle building blocks: what a trial hides, asks and accepts, beyond the plain codeword.

``needle.py`` the :class:`Needle`; ``values.py`` unguessable values; ``lexical.py`` stop words, a
small stemmer and the overlap rule; ``families.py`` value facts and look-alikes graded by similarity;
``bank.py`` the non-lexical bank; ``gold.py`` the fixture's own gold fact; ``absent.py`` abstention;
``summary.py`` a prompt's cells summed up style by style. ``needle_action.recall.trials.needles`` turns a
style name into a needle with these.
"""
