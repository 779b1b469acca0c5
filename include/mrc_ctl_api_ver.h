/* mrc-rs: versions of the MRC controller API (include/mrc_ctl.h).
 *
 * Our own text, declaring the names, values and checks of OCP's published
 * mrc_ctl_api_ver.h so controller programs written against it build here.
 *
 * A version is MAJOR.MINOR.SUBMINOR packed as MAJOR << 24 | MINOR << 16 |
 * SUBMINOR. MAJOR changes break programs, MINOR adds compatible features,
 * SUBMINOR fixes without changing behaviour.
 */
#ifndef _MRC_CTL_API_VER_H_
#define _MRC_CTL_API_VER_H_

#define MRC_CTL_API_VER_MAJOR_OFFSET 24
#define MRC_CTL_API_VER_MINOR_OFFSET 16
#define MRC_CTL_API_VER_SUBMINOR_OFFSET 0

#define MRC_CTL_API_VER(_major, _minor, _sub_minor)                  \
	(((_major) << MRC_CTL_API_VER_MAJOR_OFFSET) |                 \
	 ((_minor) << MRC_CTL_API_VER_MINOR_OFFSET) |                 \
	 ((_sub_minor)) << MRC_CTL_API_VER_SUBMINOR_OFFSET)

/* "Whatever this header is": resolved to the current version below. */
#define MRC_CTL_API_VER_LATEST MRC_CTL_API_VER(0xFF, 0xFF, 0xFFFF)

/* What this library implements, and the oldest it still accepts. */
#define MRC_CTL_API_CURRENT_VERSION MRC_CTL_API_VER(1, 0, 1)
#define MRC_CTL_API_LAST_SUPPORTED_VERSION MRC_CTL_API_VER(0, 0, 0)

/* A program may define MRC_CTL_API_VER_USED before including the header to
 * build against an older version of the declarations. */
#ifndef MRC_CTL_API_VER_USED
#define MRC_CTL_API_VER_USED MRC_CTL_API_CURRENT_VERSION
#elif MRC_CTL_API_VER_USED == MRC_CTL_API_VER_LATEST
#undef MRC_CTL_API_VER_USED
#define MRC_CTL_API_VER_USED MRC_CTL_API_CURRENT_VERSION
#endif

#if MRC_CTL_API_VER_USED > MRC_CTL_API_CURRENT_VERSION
#error "MRC_CTL_API_VER_USED is newer than this mrc_ctl.h (MRC_CTL_API_CURRENT_VERSION)"
#elif MRC_CTL_API_VER_USED < MRC_CTL_API_LAST_SUPPORTED_VERSION
#error "MRC_CTL_API_VER_USED is older than MRC_CTL_API_LAST_SUPPORTED_VERSION"
#elif MRC_CTL_API_VER_USED == MRC_CTL_API_LAST_SUPPORTED_VERSION
#warning "MRC_CTL_API_VER_USED is the oldest supported controller API version and may be dropped"
#endif

/* The vendor part of the controller API, versioned the same way. mrc-rs
 * defines no vendor controller extensions. */
#define MRC_CTL_VENDOR_API_CURRENT_VERSION MRC_CTL_API_VER(1, 0, 0)
#define MRC_CTL_VENDOR_API_LAST_SUPPORTED_VERSION MRC_CTL_API_VER(0, 0, 0)

#ifndef MRC_CTL_VENDOR_API_VER_USED
#define MRC_CTL_VENDOR_API_VER_USED MRC_CTL_VENDOR_API_CURRENT_VERSION
#elif MRC_CTL_VENDOR_API_VER_USED == MRC_CTL_API_VER_LATEST
#undef MRC_CTL_VENDOR_API_VER_USED
#define MRC_CTL_VENDOR_API_VER_USED MRC_CTL_VENDOR_API_CURRENT_VERSION
#endif

#if MRC_CTL_VENDOR_API_VER_USED > MRC_CTL_VENDOR_API_CURRENT_VERSION
#error "MRC_CTL_VENDOR_API_VER_USED is newer than MRC_CTL_VENDOR_API_CURRENT_VERSION"
#elif MRC_CTL_VENDOR_API_VER_USED < MRC_CTL_VENDOR_API_LAST_SUPPORTED_VERSION
#error "MRC_CTL_VENDOR_API_VER_USED is older than MRC_CTL_VENDOR_API_LAST_SUPPORTED_VERSION"
#elif MRC_CTL_VENDOR_API_VER_USED == MRC_CTL_VENDOR_API_LAST_SUPPORTED_VERSION
#warning "MRC_CTL_VENDOR_API_VER_USED is the oldest supported vendor controller API version and may be dropped"
#endif

#endif /* _MRC_CTL_API_VER_H_ */
