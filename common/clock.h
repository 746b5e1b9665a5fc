/*
 * clock.h — monotonic time and sleeping, the way every hetps module needs
 * them (timeouts, rates, back-off).
 */
#ifndef HC_CLOCK_H
#define HC_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Seconds / milliseconds of CLOCK_MONOTONIC. */
double hc_now_s(void);
int64_t hc_now_ms(void);

/* The time ms milliseconds from now on `clock` (CLOCK_REALTIME for
 * sem_timedwait, a condition variable's clock for pthread_cond_timedwait). */
struct timespec hc_time_in(clockid_t clock, int64_t ms);

/* Sleep s seconds (nothing when s <= 0), all of it despite signals. */
void hc_sleep_s(double s);

#endif
