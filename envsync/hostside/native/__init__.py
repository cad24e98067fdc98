"""The native layer: ELF files read, never loaded, and resolved as glibc's ld.so would.

Modules, by stage:
  binary    bounded reads of one file and the ELF encodings (layouts, address map)
  elf       read_elf(path): headers, segments, sections, the dynamic section
  dynsym    the dynamic symbol table, symbol versions and which symbols relocations look up
  ldcache   /etc/ld.so.cache (both formats) into {soname: entries} with their flags
  ldso      the facts of this host's dynamic loader: system folders, hwcaps, $LIB, $PLATFORM
  search    one DT_NEEDED name to a file, as ld.so searches (RPATH, LD_LIBRARY_PATH, RUNPATH,
            the cache, the system folders), with $ORIGIN, $LIB and $PLATFORM expanded
  loader    a process's link map: start a program, dlopen an object, check its symbols and
            versions: a verdict (ok, fails with the loader's own messages, unknown)
  verdicts  the verdict and reason types and the loader's wording
  cache     parsed files kept by (path, size, mtime_ns, ctime_ns, inode)
  demangle  C++ names made readable (c++filt when the host has it)

envsync may import every module here: each is pure but for reading files (and `demangle`,
`ldso`, which may run c++filt and ld.so --help on the host).
"""
