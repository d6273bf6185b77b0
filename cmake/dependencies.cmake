# Every library ustrain builds against, found once here. A missing one stops configure with one
# message naming the Debian package that provides it (scripts/setup.sh installs them all),
# instead of CMake's own "could not find" text.

function(ustrain_missing what debian_package)
  message(FATAL_ERROR "ustrain: ${what} was not found. Install the Debian package "
                      "'${debian_package}' (apt-get install --no-install-recommends "
                      "${debian_package}); scripts/setup.sh installs every package ustrain needs.")
endfunction()

# find_package(NAME ...) without REQUIRED, then the message above when NAME_FOUND is false.
macro(ustrain_find_package name debian_package)
  find_package(${name} QUIET ${ARGN})
  if(NOT ${name}_FOUND)
    ustrain_missing("${name}" "${debian_package}")
  endif()
endmacro()

# pkg_check_modules(PREFIX IMPORTED_TARGET MODULE) likewise.
macro(ustrain_pkg_check prefix module debian_package)
  pkg_check_modules(${prefix} QUIET IMPORTED_TARGET ${module})
  if(NOT ${prefix}_FOUND)
    ustrain_missing("${module} (pkg-config module)" "${debian_package}")
  endif()
endmacro()

find_package(PkgConfig QUIET)
if(NOT PKG_CONFIG_FOUND)
  ustrain_missing("pkg-config" "pkg-config")
endif()
ustrain_find_package(tomlplusplus libtomlplusplus-dev)
ustrain_find_package(CLI11 libcli11-dev)
ustrain_find_package(fmt libfmt-dev)
ustrain_find_package(spdlog libspdlog-dev)
ustrain_find_package(nlohmann_json nlohmann-json3-dev)
ustrain_find_package(HDF5 libhdf5-dev COMPONENTS C CXX)
# Open MPI's wrapper compilers (openmpi-bin) without its headers (libopenmpi-dev) make FindMPI
# stop with an error of its own: look for the header where the wrapper says it is first.
find_program(USTRAIN_MPICXX mpicxx)
if(USTRAIN_MPICXX)
  execute_process(COMMAND ${USTRAIN_MPICXX} --showme:incdirs OUTPUT_VARIABLE USTRAIN_MPI_INCDIRS
                  ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE USTRAIN_MPI_SHOWME)
  if(USTRAIN_MPI_SHOWME EQUAL 0 AND USTRAIN_MPI_INCDIRS)  # Open MPI's wrapper; others do not answer
    separate_arguments(USTRAIN_MPI_INCDIRS)
    find_path(USTRAIN_MPI_HEADER mpi.h HINTS ${USTRAIN_MPI_INCDIRS} NO_DEFAULT_PATH)
    if(NOT USTRAIN_MPI_HEADER)
      ustrain_missing("mpi.h (the MPI header)" libopenmpi-dev)
    endif()
  endif()
endif()
ustrain_find_package(MPI libopenmpi-dev COMPONENTS C CXX)
set(BLA_VENDOR OpenBLAS)
ustrain_find_package(BLAS libopenblas-dev)
ustrain_find_package(Protobuf libprotobuf-dev)
if(NOT Protobuf_PROTOC_EXECUTABLE)
  ustrain_missing("protoc (the protobuf compiler)" "protobuf-compiler")
endif()
ustrain_pkg_check(SentencePiece sentencepiece libsentencepiece-dev)
ustrain_find_package(ZLIB zlib1g-dev)                 # .gz inputs of data convert
ustrain_pkg_check(Zstd libzstd libzstd-dev)           # .zst inputs of data convert
ustrain_pkg_check(PCRE2 libpcre2-8 libpcre2-dev)      # tokenizer.json / tiktoken pre-tokenizer regexes
ustrain_pkg_check(ICU icu-uc libicu-dev)              # Unicode normalisation (NFC) and character classes
