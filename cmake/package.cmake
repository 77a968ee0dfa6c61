# The Debian package (cpack -G DEB in the build folder): the installed layout under /usr,
# its dependencies computed from the binaries by dpkg-shlibdeps (libtorch, libcgroup, fmt,
# turbojpeg, OpenCV, OpenBLAS through LibTorch's libblas, ...) plus what they load at run
# time (python3 for --exec, slurm-client for --launcher slurm: suggested).
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME mlbench)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "mlbench developers <mlbench@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "deep-learning training benchmarks that say why training is not faster")
set(CPACK_PACKAGE_DESCRIPTION
    "mlbench runs training benchmarks in CPU/RAM slices and measures how much of each iteration waited for data (fetch and prep stalls), with what-if predictions and remedies.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "python3")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "libopenblas0-openmp")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "slurm-client, python3-torch")
# The build tree's libraries are not in the package: the binaries link the system's.
set(CPACK_STRIP_FILES ON)
include(CPack)
