#include "store/redis/hiredis_replies.hpp"

#include <hiredis/hiredis.h>

#include <cstddef>
#include <new>

namespace sluice::redis {
namespace {

// hiredis builds replies with these functions instead of its own redisReply trees: the
// reply is built once, in our own type, and handed on by move (a batch's reply of N
// decisions was 8 allocations per decision in hiredis' objects, then copied). Only the root
// is allocated on its own; every element lives in its parent's `elements`. The root starts
// with a redisReply head because hiredis itself reads `type` and `str` of a reply that no
// callback waits for (the error a server sends before it closes a connection).
struct RootReply {
  redisReply head{};
  Reply value;
};

Reply& valueOf(const redisReadTask* task) {
  if (task->parent == nullptr) {
    return static_cast<RootReply*>(task->obj)->value;
  }
  return *static_cast<Reply*>(task->obj);
}

/// The object for `task`: a new root, or the slot its parent array made for it.
void* place(const redisReadTask* task, Reply::Type type, Reply*& out) {
  if (task->parent == nullptr) {
    auto* root = new RootReply;
    root->head.type = task->type;
    root->value.type = type;
    out = &root->value;
    return root;
  }
  Reply& parent = valueOf(task->parent);
  out = &parent.elements[static_cast<std::size_t>(task->idx)];
  out->type = type;
  return out;
}

/// place(), then `fill(reply, object)`. These functions run inside hiredis (C): no exception
/// may leave them. Out of memory they return null, which hiredis reports as an error of the
/// connection, and a root made here is freed (hiredis only frees what it was given).
template <typename Fill>
void* build(const redisReadTask* task, Reply::Type type, Fill fill) {
  void* obj = nullptr;
  try {
    Reply* reply = nullptr;
    obj = place(task, type, reply);
    fill(*reply, obj);
    return obj;
  } catch (const std::bad_alloc&) {
    if (task->parent == nullptr) {
      delete static_cast<RootReply*>(obj);
    }
    return nullptr;
  }
}

void* createString(const redisReadTask* task, char* str, std::size_t len) {
  Reply::Type type = Reply::Type::kString;
  if (task->type == REDIS_REPLY_STATUS) {
    type = Reply::Type::kStatus;
  } else if (task->type == REDIS_REPLY_ERROR) {
    type = Reply::Type::kError;
  }
  return build(task, type, [&](Reply& reply, void* obj) {
    reply.str.assign(str, len);
    if (task->parent == nullptr) {
      auto* root = static_cast<RootReply*>(obj);
      root->head.str = root->value.str.data();
      root->head.len = root->value.str.size();
    }
  });
}

void* createArray(const redisReadTask* task, int elements) {
  return build(task, Reply::Type::kArray, [&](Reply& reply, void*) {
    if (elements > 0) {
      reply.elements.resize(static_cast<std::size_t>(elements));
    }
  });
}

void* createInteger(const redisReadTask* task, long long value) {
  return build(task, Reply::Type::kInteger, [&](Reply& reply, void*) { reply.integer = value; });
}

void* createNil(const redisReadTask* task) {
  return build(task, Reply::Type::kNil, [](Reply&, void*) {});
}

void freeObject(void* obj) { delete static_cast<RootReply*>(obj); }

}  // namespace

const redisReplyObjectFunctions kReplyFunctions = {createString, createArray, createInteger,
                                                   createNil, freeObject};

Reply* replyOf(void* root) { return &static_cast<RootReply*>(root)->value; }

}  // namespace sluice::redis
