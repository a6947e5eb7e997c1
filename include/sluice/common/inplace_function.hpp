#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

namespace sluice {

template <typename Signature, std::size_t Capacity = 64>
class InplaceFunction;

namespace inplace_function_detail {
template <typename T>
struct IsStdFunction : std::false_type {};
template <typename S>
struct IsStdFunction<std::function<S>> : std::true_type {};
}  // namespace inplace_function_detail

/// A move-only callable wrapper like std::function, whose callables of up to `Capacity`
/// bytes (alignment at most max_align_t, nothrow movable) live inside the object: no heap
/// allocation. A larger callable is kept on the heap, as std::function keeps anything over
/// 16 bytes (libstdc++). Used for the callbacks of the decision path (DecisionService's),
/// whose usual captures (a Respond, a few pointers) exceed std::function's in-place room.
///
/// As std::function: empty when default-constructed, from nullptr or moved from; calling an
/// empty one throws std::bad_function_call; operator() is const and calls the callable as
/// non-const (a mutable lambda works).
template <typename R, typename... Args, std::size_t Capacity>
class InplaceFunction<R(Args...), Capacity> {
 public:
  InplaceFunction() noexcept = default;
  InplaceFunction(std::nullptr_t) noexcept {}  // NOLINT(google-explicit-constructor)

  template <typename F, typename D = std::decay_t<F>,
            typename = std::enable_if_t<!std::is_same_v<D, InplaceFunction> &&
                                        std::is_invocable_r_v<R, D&, Args...>>>
  InplaceFunction(F&& f) {  // NOLINT(google-explicit-constructor): as std::function
    if constexpr (std::is_pointer_v<D> || std::is_member_pointer_v<D> ||
                  inplace_function_detail::IsStdFunction<D>::value) {
      if (f == nullptr) {
        return;
      }
    }
    if constexpr (kInPlace<D>) {
      ::new (static_cast<void*>(storage_)) D(std::forward<F>(f));
      ops_ = &kLocalOps<D>;
    } else {
      ::new (static_cast<void*>(storage_)) D*(new D(std::forward<F>(f)));
      ops_ = &kHeapOps<D>;
    }
  }

  InplaceFunction(InplaceFunction&& other) noexcept { takeFrom(other); }

  InplaceFunction& operator=(InplaceFunction&& other) noexcept {
    if (this != &other) {
      reset();
      takeFrom(other);
    }
    return *this;
  }

  InplaceFunction& operator=(std::nullptr_t) noexcept {
    reset();
    return *this;
  }

  template <typename F, typename D = std::decay_t<F>,
            typename = std::enable_if_t<!std::is_same_v<D, InplaceFunction> &&
                                        std::is_invocable_r_v<R, D&, Args...>>>
  InplaceFunction& operator=(F&& f) {
    *this = InplaceFunction(std::forward<F>(f));
    return *this;
  }

  InplaceFunction(const InplaceFunction&) = delete;
  InplaceFunction& operator=(const InplaceFunction&) = delete;

  ~InplaceFunction() { reset(); }

  explicit operator bool() const noexcept { return ops_ != nullptr; }
  friend bool operator==(const InplaceFunction& f, std::nullptr_t) noexcept { return !f; }

  R operator()(Args... args) const {
    if (ops_ == nullptr) {
      throw std::bad_function_call();
    }
    return ops_->invoke(const_cast<unsigned char*>(storage_), std::forward<Args>(args)...);
  }

  /// True when a callable of type F would be stored in place (no allocation).
  template <typename F>
  static constexpr bool storesInPlace() {
    return kInPlace<std::decay_t<F>>;
  }

 private:
  struct Ops {
    R (*invoke)(void* storage, Args&&... args);
    /// Move-constructs into `to` and destroys the source.
    void (*relocate)(void* from, void* to) noexcept;
    void (*destroy)(void* storage) noexcept;
  };

  template <typename D>
  static constexpr bool kInPlace =
      sizeof(D) <= Capacity &&
      alignof(D) <= alignof(std::max_align_t) && std::is_nothrow_move_constructible_v<D>;

  template <typename D>
  static constexpr Ops kLocalOps = {
      [](void* storage, Args&&... args) -> R {
        return std::invoke(*static_cast<D*>(storage), std::forward<Args>(args)...);
      },
      [](void* from, void* to) noexcept {
        D* source = static_cast<D*>(from);
        ::new (to) D(std::move(*source));
        source->~D();
      },
      [](void* storage) noexcept { static_cast<D*>(storage)->~D(); },
  };

  template <typename D>
  static constexpr Ops kHeapOps = {
      [](void* storage, Args&&... args) -> R {
        return std::invoke(**static_cast<D**>(storage), std::forward<Args>(args)...);
      },
      [](void* from, void* to) noexcept { ::new (to) D*(*static_cast<D**>(from)); },
      [](void* storage) noexcept { delete *static_cast<D**>(storage); },
  };

  void takeFrom(InplaceFunction& other) noexcept {
    if (other.ops_ != nullptr) {
      other.ops_->relocate(other.storage_, storage_);
      ops_ = std::exchange(other.ops_, nullptr);
    }
  }

  void reset() noexcept {
    if (ops_ != nullptr) {
      std::exchange(ops_, nullptr)->destroy(storage_);
    }
  }

  alignas(
      std::max_align_t) unsigned char storage_[Capacity < sizeof(void*) ? sizeof(void*) : Capacity];
  const Ops* ops_ = nullptr;
};

}  // namespace sluice
