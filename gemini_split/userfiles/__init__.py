"""gemini-cli's own files, read (and some written) where the user is.

``settings.json`` (:mod:`.settings`, edited in place by :mod:`.settings_edit`),
folder trust (:mod:`.folder_trust`), ``.env`` (:mod:`.env_files`), context
files and their ``@`` imports (:mod:`.context`, :mod:`.memory_import`),
custom commands, skills, extensions, hooks, sub-agent definitions (local
and remote), and ``GEMINI_SYSTEM_MD``. The files are gemini-cli's, in its
formats, so either program reads what the other wrote.

This package is a leaf below the client, the tool runtime and the server:
it imports none of them (``tests/test_app.py``).
"""
