"""Templates from the checkout, rendered the way the application renders them, and bounded:
Jinja2 in a sandbox (:mod:`.sandbox`, :mod:`.limits`) run in a worker process (:mod:`.isolate`),
role markers (:mod:`.roles`), ``.prompty`` (:mod:`.prompty`), Google Dotprompt with its Handlebars
engine (:mod:`.dotprompt`, :mod:`.handlebars`), front-matter declarations (:mod:`.declared`),
fixtures (:mod:`.fixtures`); :mod:`.raw` is one template's raw output."""
