# README.md must show tests/install_consumer/main.cpp (from its first #include <spattn line) verbatim,
# so the documented example is the compiled and tested one.
file(READ ${SOURCE_DIR}/README.md readme)
file(READ ${SOURCE_DIR}/tests/install_consumer/main.cpp example)
string(FIND "${example}" "#include <spattn" start)
string(SUBSTRING "${example}" ${start} -1 example)
string(FIND "${readme}" "${example}" found)
if(found EQUAL -1)
  message(FATAL_ERROR "README.md does not contain tests/install_consumer/main.cpp verbatim; update the README")
endif()
