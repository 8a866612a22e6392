// The Linux interfaces the uhid transport needs: the uhid event ABI from the
// kernel's UAPI header, and libudev to find the hidraw node the kernel makes
// for our device. Only the daemon target imports this module.
#ifndef CLINUXHID_H
#define CLINUXHID_H

#include <linux/uhid.h>
#include <libudev.h>

#endif
