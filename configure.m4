# -*- autoconf -*-
#
# In-tree configuration of the usnic BTL, for use inside an Open MPI 4.1
# source tree at opal/mca/btl/usnic (picked up by Open MPI's autogen.pl).
#
# The standalone build uses configure.ac instead; Makefile.am is shared,
# so everything it needs that Open MPI's configure does not already
# provide is defined here:
#
#   opal_btl_usnic_CPPFLAGS / _CFLAGS / _LDFLAGS / _LIBS   (AC_SUBST)
#   BTL_USNIC_STANDALONE                                     (AM_CONDITIONAL, false)
#
# BTL_USNIC_STANDALONE is intentionally *not* defined for the C code in
# this build, and neither is USNIC_HELP_DIR: Open MPI finds the help file
# in its own data directory.
#

# MCA_opal_btl_usnic_POST_CONFIG([should_build])
# ----------------------------------------------
# Open MPI runs this unconditionally, which is what AM_CONDITIONAL needs.
AC_DEFUN([MCA_opal_btl_usnic_POST_CONFIG], [
    AM_CONDITIONAL([BTL_USNIC_STANDALONE], [false])
])dnl

# MCA_opal_btl_usnic_CONFIG([action-if-can-compile],
#                           [action-if-cant-compile])
# ----------------------------------------------------
AC_DEFUN([MCA_opal_btl_usnic_CONFIG], [
    AC_CONFIG_FILES([opal/mca/btl/usnic/Makefile])

    AC_ARG_WITH([usnic],
        [AS_HELP_STRING([--with-usnic],
            [Build the usnic BTL, and fail if it cannot be built
             (--without-usnic skips it)])])

    OPAL_VAR_SCOPE_PUSH([btl_usnic_happy btl_usnic_ofi btl_usnic_save_CPPFLAGS])

    btl_usnic_happy=yes
    AS_IF([test "$with_usnic" = no],
        [AC_MSG_NOTICE([usnic BTL disabled by --without-usnic])
         btl_usnic_happy=no])

    # Linux only.
    AS_IF([test "$btl_usnic_happy" = yes],
        [AC_MSG_CHECKING([whether the usnic BTL supports $host_os])
         AS_CASE([$host_os],
             [*linux*], [],
             [btl_usnic_happy=no])
         AC_MSG_RESULT([$btl_usnic_happy])])

    # libfabric.  Open MPI 4.1 provides OPAL_CHECK_OFI; depending on the
    # 4.1.x release it either takes (prefix, found, not-found) and fills
    # in prefix_{CPPFLAGS,LDFLAGS,LIBS}, or takes no arguments and
    # reports through opal_ofi_happy / opal_ofi_{CPPFLAGS,LDFLAGS,LIBS}.
    # Cope with both; without the macro fall back to plain checks.
    AS_IF([test "$btl_usnic_happy" = yes],
        [m4_ifdef([OPAL_CHECK_OFI],
            [btl_usnic_ofi=unknown
             OPAL_CHECK_OFI([opal_btl_usnic],
                            [btl_usnic_ofi=yes],
                            [btl_usnic_ofi=no])
             AS_IF([test "$btl_usnic_ofi" = unknown],
                 [AS_IF([test "$opal_ofi_happy" = yes],
                      [btl_usnic_ofi=yes
                       opal_btl_usnic_CPPFLAGS="$opal_btl_usnic_CPPFLAGS $opal_ofi_CPPFLAGS"
                       opal_btl_usnic_LDFLAGS="$opal_btl_usnic_LDFLAGS $opal_ofi_LDFLAGS"
                       opal_btl_usnic_LIBS="$opal_btl_usnic_LIBS $opal_ofi_LIBS"],
                      [btl_usnic_ofi=no])])],
            [btl_usnic_ofi=no
             AC_CHECK_HEADER([rdma/fabric.h],
                 [AC_CHECK_LIB([fabric], [fi_getinfo],
                     [btl_usnic_ofi=yes
                      opal_btl_usnic_LIBS="$opal_btl_usnic_LIBS -lfabric"])])])
         btl_usnic_happy=$btl_usnic_ofi])

    # libfabric API >= 1.5.
    AS_IF([test "$btl_usnic_happy" = yes],
        [AC_MSG_CHECKING([whether libfabric is >= 1.5 for the usnic BTL])
         btl_usnic_save_CPPFLAGS=$CPPFLAGS
         CPPFLAGS="$opal_btl_usnic_CPPFLAGS $CPPFLAGS"
         AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <rdma/fabric.h>]], [[
#if !defined(FI_MAJOR_VERSION) || !defined(FI_MINOR_VERSION)
#error cannot determine the libfabric version
#elif FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION) < FI_VERSION(1, 5)
#error libfabric is older than 1.5
#endif
]])],
             [],
             [btl_usnic_happy=no])
         CPPFLAGS=$btl_usnic_save_CPPFLAGS
         AC_MSG_RESULT([$btl_usnic_happy])])

    AS_IF([test "$btl_usnic_happy" = yes],
        [$1],
        [AS_IF([test "$with_usnic" = yes],
             [AC_MSG_WARN([--with-usnic was given, but the usnic BTL cannot be built])
              AC_MSG_WARN([(it needs Linux and libfabric >= 1.5; see --with-ofi)])
              AC_MSG_ERROR([Cannot continue])])
         $2])

    # Makefile.am always references these; the compile flags that the
    # standalone build adds (warnings, sanitizers) come from Open MPI here.
    opal_btl_usnic_CFLAGS=
    AC_SUBST([opal_btl_usnic_CPPFLAGS])
    AC_SUBST([opal_btl_usnic_CFLAGS])
    AC_SUBST([opal_btl_usnic_LDFLAGS])
    AC_SUBST([opal_btl_usnic_LIBS])

    OPAL_VAR_SCOPE_POP
])dnl
