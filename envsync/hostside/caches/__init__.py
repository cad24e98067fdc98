"""What the host keeps between runs, each kept by content or stat: it never changes an answer.

folder        the cache folder: where it is, its layout, its bound
store         parsed facts kept by content (sha256 of the file), pruned by age and size
chunks        large JSON cut into content-addressed chunks
graphcache    the startup graph kept whole, by the environment's state
graphfile     the kept graph's file
graphpatch    a kept graph patched for the files that changed since
graphstates   earlier graphs kept by state, for a change undone
share         packs of parsed facts offered across hosts
mentions      which files name which modules (a lazy table's importers)
"""
