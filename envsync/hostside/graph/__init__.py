"""The startup graph: which modules the service's startup runs, read with ast, never run.

startup       GraphBuilder: the walk from the roots, every module read once, in order
roots         the roots: the launch command's modules, the site's .pth lines, a package's
              submodules
finder        a module name to its file, as the import system finds it (editable finders too)
analyse       one file's facts: its imports with their contexts, what it binds, its doors
astutil       the ast helpers analyse and the facts code share
compilable    what the compiler refuses after the parser took it, as each version says
lazy          modules that bind names on demand (__getattr__ over a table of submodules)
versionchecks the version checks a module runs at import
model         the model the service serves, and the model modules that serve it
parallel      files parsed ahead by a forked pool of workers
demand        reachability by demand: from a module up to the roots, parsing only the
              files that name it (the walk's rules, the walk's reader)
search        which files hold some words (grep where the host has it)
calls         which of a module's own functions run while it is imported, with what
follow        calls made at import followed across modules, toward some imports
"""
