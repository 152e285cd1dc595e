#pragma once
// Internal to core/convert: the few pickle opcodes (protocol 2) that DCP's .metadata and a
// torch.save item's data.pkl need, written from C++ values. No memo: every global is spelled out
// where it is used, which any unpickler accepts.

#include <cstdint>
#include <string>
#include <string_view>

namespace shardscope::convert {

class PickleWriter {
public:
    PickleWriter(); // PROTO 2
    std::string finish(); // STOP, and the bytes

    void global(std::string_view module, std::string_view name); // GLOBAL
    void text(std::string_view value); // BINUNICODE (the caller checks UTF-8)
    void integer(int64_t value); // BININT1 / BININT / LONG1
    void boolean(bool value); // NEWTRUE / NEWFALSE
    void none();
    void mark();
    void tuple(); // MARK ... TUPLE
    void empty_tuple();
    void empty_dict();
    void empty_list();
    void set_items(); // MARK key value ... SETITEMS
    void append(); // list value APPEND
    void reduce(); // callable args REDUCE
    void new_object(); // cls () NEWOBJ
    void build(); // object state BUILD
    void persistent_id(); // BINPERSID

    // `cls` built from `module.name` with no arguments, then its state dict follows: the caller
    // pushes mark(), key/value pairs, then calls end_object().
    void begin_object(std::string_view module, std::string_view name);
    void end_object(); // SETITEMS BUILD

private:
    std::string m_bytes;
};

} // namespace shardscope::convert
