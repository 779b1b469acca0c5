/*
 * mrc-rs: API version encoding of the OCP MRC application API (mrc.h).
 *
 * Written for mrc-rs from the interface OCP publishes (opencomputeproject/
 * OCP-Multipath-Reliable-Connection, mrc_api_ver.h): the macro names and values
 * are that interface's; the text is ours. SPDX-License-Identifier: MIT OR Apache-2.0
 */
#ifndef _MRC_API_VER_H_
#define _MRC_API_VER_H_

/* A version is MAJOR.MINOR.SUBMINOR packed into 32 bits: 8 | 8 | 16. */
#define MRC_API_VER_MAJOR_OFFSET 24
#define MRC_API_VER_MINOR_OFFSET 16
#define MRC_API_VER_SUBMINOR_OFFSET 0

#define MRC_API_VER(_major, _minor, _sub_minor)        \
	(((_major) << MRC_API_VER_MAJOR_OFFSET) |      \
	 ((_minor) << MRC_API_VER_MINOR_OFFSET) |      \
	 ((_sub_minor)) << MRC_API_VER_SUBMINOR_OFFSET)

/* "Whatever this header is": an application that does not track versions. */
#define MRC_API_VER_LATEST MRC_API_VER(0xFF, 0xFF, 0xFFFF)

/* The versions of the API this header and lib_mrc.so implement. */
#define MRC_API_CURRENT_VERSION MRC_API_VER(1, 0, 1)
#define MRC_API_LAST_SUPPORTED_VERSION MRC_API_VER(0, 0, 0)

/* The version an application compiles against (define it before the include to pick one). */
#ifndef MRC_API_VER_USED
#define MRC_API_VER_USED MRC_API_CURRENT_VERSION
#elif MRC_API_VER_USED == MRC_API_VER_LATEST
#undef MRC_API_VER_USED
#define MRC_API_VER_USED MRC_API_CURRENT_VERSION
#endif

#if MRC_API_VER_USED > MRC_API_CURRENT_VERSION
#error "MRC_API_VER_USED is newer than this mrc.h (MRC_API_CURRENT_VERSION)"
#elif MRC_API_VER_USED < MRC_API_LAST_SUPPORTED_VERSION
#error "MRC_API_VER_USED is older than MRC_API_LAST_SUPPORTED_VERSION"
#elif MRC_API_VER_USED == MRC_API_LAST_SUPPORTED_VERSION
#warning "MRC_API_VER_USED is the oldest supported version and may be dropped"
#endif

/* The provider's own (vendor) API surface: mrc-rs adds none beyond the core API. */
#define MRC_VENDOR_API_CURRENT_VERSION MRC_API_VER(1, 0, 0)
#define MRC_VENDOR_API_LAST_SUPPORTED_VERSION MRC_API_VER(0, 0, 0)

#ifndef MRC_VENDOR_API_VER_USED
#define MRC_VENDOR_API_VER_USED MRC_VENDOR_API_CURRENT_VERSION
#elif MRC_VENDOR_API_VER_USED == MRC_API_VER_LATEST
#undef MRC_VENDOR_API_VER_USED
#define MRC_VENDOR_API_VER_USED MRC_VENDOR_API_CURRENT_VERSION
#endif

#if MRC_VENDOR_API_VER_USED > MRC_VENDOR_API_CURRENT_VERSION
#error "MRC_VENDOR_API_VER_USED is newer than MRC_VENDOR_API_CURRENT_VERSION"
#elif MRC_VENDOR_API_VER_USED < MRC_VENDOR_API_LAST_SUPPORTED_VERSION
#error "MRC_VENDOR_API_VER_USED is older than MRC_VENDOR_API_LAST_SUPPORTED_VERSION"
#elif MRC_VENDOR_API_VER_USED == MRC_VENDOR_API_LAST_SUPPORTED_VERSION
#warning "MRC_VENDOR_API_VER_USED is the oldest supported vendor version and may be dropped"
#endif

#endif /* _MRC_API_VER_H_ */
