"""``needle init``: find the repository's prompts (:mod:`.templates`) and write a commented starter
threshold file (:mod:`.starter`)."""
