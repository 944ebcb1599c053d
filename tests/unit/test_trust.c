// SPDX-License-Identifier: MIT
/*
 * Whether the registry can be trusted (src/registry/trust.c): the first
 * gh_mark_untrusted makes it untrusted for good and says so once, on the
 * log and to the UNTRUSTED subscribers (never to the others); every mark
 * is counted; marks racing on many threads still say it once; the
 * layer above that keeps its own copy of "trusted" is told at every
 * mark, once gh_untrusted is set; with GDRHOOK_STRICT=1 the process
 * aborts.
 */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <sys/wait.h>

#include "harness.h"
#include "capture.h"
#include "registry/registry.h"

struct seen {
	int n;
	uint32_t type;
	char api[64];
	struct gdrhook_range range;
};

static void on_event(const struct gdrhook_event *ev, void *arg)
{
	struct seen *s = arg;

	__atomic_add_fetch(&s->n, 1, __ATOMIC_RELAXED);
	s->type = ev->type;
	s->range = ev->range;
	snprintf(s->api, sizeof(s->api), "%s", ev->api ? ev->api : "(null)");
}

TEST(first_mark_untrusts_and_says_it_once)
{
	static struct seen untrusted, others;
	const char *out;

	gh_log_level = GH_LOG_WARN;
	CHECK(gh_subscribers_add(GDRHOOK_EVENT_UNTRUSTED, on_event,
				 &untrusted) >= 0);
	CHECK(gh_subscribers_add(GDRHOOK_EVENT_ALLOC | GDRHOOK_EVENT_FREE,
				 on_event, &others) >= 0);
	CHECK_EQ(gh_untrusted, 0);
	CHECK_EQ(gh_ctr.untrusted, 0);

	capture_begin();
	gh_mark_untrusted("cuFirstCall", "the first reason");
	gh_mark_untrusted("cuSecondCall", "the second reason");
	out = capture_end();

	CHECK_EQ(gh_untrusted, 1);
	CHECK_EQ(gh_ctr.untrusted, 2);		/* every mark counts */
	CHECK_EQ(untrusted.n, 1);		/* told once, of the first */
	CHECK_EQ(untrusted.type, GDRHOOK_EVENT_UNTRUSTED);
	CHECK_STR(untrusted.api, "cuFirstCall");
	CHECK_EQ(untrusted.range.base, 0);
	CHECK_EQ(untrusted.range.size, 0);
	CHECK_EQ(others.n, 0);
	CHECK_EQ(capture_count(out, "cuFirstCall: the first reason; the "
			       "registry is now untrusted and caching is off"),
		 1);
	CHECK_EQ(capture_count(out, "untrusted"), 1);
	CHECK_EQ(capture_count(out, "cuSecondCall"), 0);
}

TEST(said_at_the_error_level)
{
	const char *out;

	gh_log_level = GH_LOG_NONE;
	capture_begin();
	gh_mark_untrusted("cuQuiet", "not said");
	out = capture_end();
	CHECK_EQ(gh_untrusted, 1);
	CHECK_STR(out, "");

	gh_log_level = GH_LOG_ERR;
	capture_begin();
	gh_mark_untrusted("cuAgain", "said only the first time");
	out = capture_end();
	CHECK_STR(out, "");	/* untrusted already: nothing new to say */
}

#define THREADS	8
#define MARKS	200

static struct seen racing;
static int go;

static void *marker(void *arg)
{
	while (!__atomic_load_n(&go, __ATOMIC_ACQUIRE))
		sched_yield();
	for (int i = 0; i < MARKS; i++)
		gh_mark_untrusted("cuRace", "racing marks");
	return NULL;
}

TEST(racing_marks_say_it_once)
{
	pthread_t t[THREADS];

	gh_log_level = GH_LOG_NONE;
	CHECK(gh_subscribers_add(GDRHOOK_EVENT_UNTRUSTED, on_event,
				 &racing) >= 0);
	for (int i = 0; i < THREADS; i++)
		CHECK_EQ(pthread_create(&t[i], NULL, marker, NULL), 0);
	__atomic_store_n(&go, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	CHECK_EQ(gh_untrusted, 1);
	CHECK_EQ(racing.n, 1);
	CHECK_EQ(gh_ctr.untrusted, THREADS * MARKS);
}

static int told, untrusted_when_told;

static void on_untrusted(void)
{
	told++;
	untrusted_when_told = __atomic_load_n(&gh_untrusted, __ATOMIC_RELAXED);
}

TEST(each_mark_tells_the_layer_above_after_untrusting)
{
	gh_log_level = GH_LOG_NONE;
	gh_trust_on_untrusted(on_untrusted);
	CHECK_EQ(told, 0);
	gh_mark_untrusted("cuA", "first");
	CHECK_EQ(told, 1);
	CHECK_EQ(untrusted_when_told, 1);
	gh_mark_untrusted("cuB", "second");
	CHECK_EQ(told, 2);
	/* Told no more once the slot is emptied. */
	gh_trust_on_untrusted(NULL);
	gh_mark_untrusted("cuC", "third");
	CHECK_EQ(told, 2);
}

TEST(strict_aborts)
{
	const char *out;
	int status = 0;
	pid_t pid;

	gh_registry_cfg.strict = 1;
	gh_log_level = GH_LOG_ERR;
	capture_begin();
	pid = fork();
	if (!pid) {
		gh_mark_untrusted("cuStrict", "strict mode");
		_exit(0);	/* not reached: the mark aborts */
	}
	CHECK(pid > 0);
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	out = capture_end();
	CHECK(WIFSIGNALED(status));
	CHECK_EQ(WTERMSIG(status), SIGABRT);
	CHECK_EQ(capture_count(out, "GDRHOOK_STRICT=1: aborting"), 1);

	/* not strict: the process goes on */
	gh_registry_cfg.strict = 0;
	gh_log_level = GH_LOG_NONE;
	gh_mark_untrusted("cuLenient", "not strict");
	CHECK_EQ(gh_untrusted, 1);
}

TEST_MAIN()
