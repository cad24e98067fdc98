"""The native layer: ELF files read, never loaded, and resolved as glibc's ld.so would.

Modules, by stage:
  binary    bounded reads of one file and the ELF encodings (layouts, address map)
  elf       read_elf(path): headers, segments, sections, the dynamic section
  dynsym    the dynamic symbol table, symbol versions and which symbols relocations look up
  ldcache   /etc/ld.so.cache (every format ldconfig writes) into {soname: entries} with flags
  ldso      the facts of this host's dynamic loader: system folders, hwcaps, $LIB, $PLATFORM
  search    one DT_NEEDED name to a file, as ld.so searches (RPATH, LD_LIBRARY_PATH, RUNPATH,
            the cache, the system folders), with $ORIGIN, $LIB and $PLATFORM expanded; the
            Disk that is the layer's one view of the file system
  loader    a process's link map: start a program, dlopen objects, check their versions and
            symbols (Linker.judge replays a whole startup)
  verdicts  what the loader is asked (Request) and will do (Load: ok, fails with the loader's
            own messages, unknown), and their JSON codec
  cache     parsed files and whole verdicts kept by stat keys (the host side's shared.Stamp:
            a warm check only stats)
  codec     parsed files as JSON data, for the host's cache file
  demangle  C++ names made readable (c++filt when the host has it)

envsync may import every module here (verdicts and its codec to read what a host sent):
each is pure but for reading files, and for `ldso` and `demangle`, which may run
`ld.so --help` and c++filt on the host.
"""
