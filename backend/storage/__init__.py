"""Files on disk, as every part writes and reads them; nothing here knows a run, a model or a row.

atomic_files.py  atomic writes (tmp file + rename), JSON reads that forgive a missing or torn file,
                 folders built aside and renamed into place, fsyncs of files and folders
file_lock.py     the inter-process locks (status.json, launches, builds, the queue's scheduler)
safe_names.py    the one way from user text to a file name inside the workspace
user_cache.py    the user's cache folder for one-time builds (outside any checkout)

Nothing heavy is imported here: the UI imports these at start-up.
"""
