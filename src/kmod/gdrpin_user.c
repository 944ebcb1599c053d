// SPDX-License-Identifier: GPL-2.0
/*
 * gdrpin: per-user (uid) limits.
 *
 * Every context is charged to the real uid that opened it: one context
 * against max_user_contexts (each holds a status area of status_pages
 * pages, charged to the opener's memory cgroup as well), and the bytes of
 * its pins against max_user_pinned_bytes. Both are module parameters,
 * 0 = unlimited. Over a limit, open fails with -EMFILE and PIN with
 * -ENOSPC; one user can no longer use up what the global max_pinned_bytes
 * leaves for everyone.
 */
#include <linux/cred.h>
#include <linux/hashtable.h>
#include <linux/moduleparam.h>
#include <linux/slab.h>
#include <linux/uidgid.h>

#include "gdrpin.h"

struct gdrpin_user {
	struct hlist_node node;		/* gdrpin_user_hash */
	kuid_t uid;
	u32 nctx;			/* open contexts, gdrpin_user_lock */
	atomic64_t pinned_bytes;
};

static DEFINE_MUTEX(gdrpin_user_lock);
static DEFINE_HASHTABLE(gdrpin_user_hash, 6);

unsigned long gdrpin_max_user_pinned_bytes;
module_param_named(max_user_pinned_bytes, gdrpin_max_user_pinned_bytes, ulong,
		   0644);
MODULE_PARM_DESC(max_user_pinned_bytes,
		 "Quota on bytes pinned by the fds of one uid; 0 = unlimited (-ENOSPC)");

unsigned int gdrpin_max_user_contexts = 256;
module_param_named(max_user_contexts, gdrpin_max_user_contexts, uint, 0644);
MODULE_PARM_DESC(max_user_contexts,
		 "Open fds (each with its status area) per uid; 0 = unlimited (-EMFILE)");

struct gdrpin_user *gdrpin_user_open(void)
{
	unsigned int max = READ_ONCE(gdrpin_max_user_contexts);
	kuid_t uid = current_uid();
	struct gdrpin_user *u;

	mutex_lock(&gdrpin_user_lock);
	hash_for_each_possible(gdrpin_user_hash, u, node, __kuid_val(uid))
		if (uid_eq(u->uid, uid))
			goto found;
	u = kzalloc(sizeof(*u), GFP_KERNEL_ACCOUNT);
	if (!u) {
		u = ERR_PTR(-ENOMEM);
		goto out;
	}
	u->uid = uid;
	atomic64_set(&u->pinned_bytes, 0);
	hash_add(gdrpin_user_hash, &u->node, __kuid_val(uid));
found:
	if (max && u->nctx >= max) {
		u = ERR_PTR(-EMFILE);	/* nctx > 0: the entry stays */
		goto out;
	}
	u->nctx++;
out:
	mutex_unlock(&gdrpin_user_lock);
	return u;
}

void gdrpin_user_close(struct gdrpin_user *u)
{
	mutex_lock(&gdrpin_user_lock);
	if (!WARN_ON(!u->nctx) && !--u->nctx) {
		WARN_ON(atomic64_read(&u->pinned_bytes));
		hash_del(&u->node);
		kfree(u);
	}
	mutex_unlock(&gdrpin_user_lock);
}

bool gdrpin_user_reserve(struct gdrpin_user *u, u64 bytes)
{
	u64 max = READ_ONCE(gdrpin_max_user_pinned_bytes);
	u64 now = atomic64_add_return(bytes, &u->pinned_bytes);

	if (max && now > max) {
		atomic64_sub(bytes, &u->pinned_bytes);
		return false;
	}
	return true;
}

void gdrpin_user_unreserve(struct gdrpin_user *u, u64 bytes)
{
	WARN_ON(atomic64_sub_return(bytes, &u->pinned_bytes) < 0);
}
