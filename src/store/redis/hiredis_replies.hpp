#pragma once

#include <hiredis/read.h>

#include "store/redis/redis_connection.hpp"

namespace sluice::redis {

/// hiredis' reply-object functions that build its replies as our own `Reply` (set as a
/// context's `c.reader->fn`): each reply is built once and handed on by move, instead of
/// hiredis' redisReply trees copied afterwards.
extern const redisReplyObjectFunctions kReplyFunctions;

/// The `Reply` of a root object those functions made (what hiredis hands a callback).
Reply* replyOf(void* root);

}  // namespace sluice::redis
