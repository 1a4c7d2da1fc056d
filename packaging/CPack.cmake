# Installation layout and the Debian packages (`cpack -G DEB` in the build folder).
# Included from the top-level CMakeLists.txt. Three components, three packages:
#   tickd         the daemon (app/: the binary; here: unit, examples, the manual, bash
#                 completion; docs/: the man pages)
#   libtickd0     libtickd.so.0 (lib/)
#   libtickd-dev  the public headers, the .so link, the CMake package, tickd.pc (lib/)
#                 and the plugin header (jobs/)
include(GNUInstallDirs)
install(FILES ${CMAKE_CURRENT_LIST_DIR}/tickd.service
        DESTINATION lib/systemd/system COMPONENT tickd)
install(FILES ${CMAKE_CURRENT_LIST_DIR}/jobs.example.yaml
        DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples COMPONENT tickd)
# Prometheus alerting rules and their promtool unit tests (docs/design.md §9).
install(FILES ${CMAKE_CURRENT_LIST_DIR}/tickd-alerts.yml ${CMAKE_CURRENT_LIST_DIR}/tickd-alerts.test.yml
        DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples/prometheus COMPONENT tickd)
# The manual as it is laid out in the repository, so that its relative links work:
# README.md, docs/ (the guides and their map), and the contracts operators read (the
# design: job file, log lines, signals …; each backend's protocol) beside the README,
# where they always were, with links to them from docs/.
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/docs/design.md
              ${PROJECT_SOURCE_DIR}/docs/backends.md
        DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT tickd)
file(GLOB tickd_guides ${PROJECT_SOURCE_DIR}/docs/*.md)
list(FILTER tickd_guides EXCLUDE REGEX "/(design|backends)\\.md$")
install(FILES ${tickd_guides} DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs COMPONENT tickd)
file(MAKE_DIRECTORY ${PROJECT_BINARY_DIR}/doc-links)
foreach(contract design.md backends.md)
  file(CREATE_LINK ../${contract} ${PROJECT_BINARY_DIR}/doc-links/${contract} SYMBOLIC)
  install(FILES ${PROJECT_BINARY_DIR}/doc-links/${contract}
          DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs COMPONENT tickd)
endforeach()
# Bash completion, where bash-completion looks for it when `tickd` is first completed.
install(FILES ${CMAKE_CURRENT_LIST_DIR}/tickd.bash-completion
        DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions RENAME tickd
        COMPONENT tickd)
# The man pages: docs/CMakeLists.txt.

set(CPACK_PACKAGE_NAME tickd)
set(CPACK_PACKAGE_VENDOR "tickd")
set(CPACK_PACKAGE_CONTACT "tickd maintainers <maintainers@tickd.invalid>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "scheduled jobs that run exactly once per tick across a fleet")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)          # dpkg-shlibdeps: libyaml-cpp, libhiredis, …
# libtickd.so.0 is found in the build tree (its own package is libtickd0, below).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${PROJECT_BINARY_DIR}/lib)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL tickd libtickd0 libtickd-dev)
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)   # Depends: libtickd0 (= version)
set(CPACK_COMPONENT_TICKD_DEPENDS libtickd0)
set(CPACK_COMPONENT_LIBTICKD-DEV_DEPENDS libtickd0)
set(CPACK_DEBIAN_TICKD_PACKAGE_NAME tickd)
set(CPACK_DEBIAN_TICKD_PACKAGE_DEPENDS "tzdata, util-linux")  # zone data; setpriv for jobs
set(CPACK_DEBIAN_LIBTICKD0_PACKAGE_NAME libtickd0)
set(CPACK_DEBIAN_LIBTICKD0_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_LIBTICKD0_PACKAGE_DEPENDS "tzdata")
set(CPACK_COMPONENT_LIBTICKD0_DESCRIPTION
    "tickd's engine as a shared library: once-per-tick scheduling and fenced locks")
set(CPACK_DEBIAN_LIBTICKD-DEV_PACKAGE_NAME libtickd-dev)
set(CPACK_DEBIAN_LIBTICKD-DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_LIBTICKD-DEV_PACKAGE_SHLIBDEPS OFF)  # no binaries of its own
set(CPACK_COMPONENT_LIBTICKD-DEV_DESCRIPTION
    "tickd library headers, CMake package and pkg-config file for C++20 services")
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "https://tickd.invalid")
set(CPACK_STRIP_FILES ON)
include(CPack)
