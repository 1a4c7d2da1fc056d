# Installation layout and the Debian package (`cpack -G DEB` in the build folder).
# Included from the top-level CMakeLists.txt. The binary installs from app/; the
# plugin header from jobs/.
include(GNUInstallDirs)
install(FILES ${CMAKE_CURRENT_LIST_DIR}/tickd.service
        DESTINATION lib/systemd/system COMPONENT tickd)
install(FILES ${CMAKE_CURRENT_LIST_DIR}/jobs.example.yaml
        DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples COMPONENT tickd)
# Prometheus alerting rules and their promtool unit tests (docs/design.md §9).
install(FILES ${CMAKE_CURRENT_LIST_DIR}/tickd-alerts.yml ${CMAKE_CURRENT_LIST_DIR}/tickd-alerts.test.yml
        DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples/prometheus COMPONENT tickd)
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR}
        COMPONENT tickd)

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
set(CPACK_DEBIAN_PACKAGE_DEPENDS "tzdata, util-linux")  # zone data; setpriv for jobs
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "https://tickd.invalid")
set(CPACK_STRIP_FILES ON)
include(CPack)
