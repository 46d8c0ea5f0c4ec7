package main

// The IANA time zone database, embedded (about 450 KB), so that a rule's
// calendar time_zone loads in an image with no /usr/share/zoneinfo (scratch,
// distroless). Go consults it only when the system's database lacks a zone.
import _ "time/tzdata"
