#include "core/convert/internal/pickle_writer.h"

#include <cstring>

namespace shardscope::convert {

namespace {

void put_le(std::string& out, uint64_t value, int bytes)
{
    for (int i = 0; i < bytes; ++i)
        out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

} // namespace

PickleWriter::PickleWriter() : m_bytes("\x80\x02", 2) {}

std::string PickleWriter::finish()
{
    m_bytes.push_back('.');
    return std::move(m_bytes);
}

void PickleWriter::global(std::string_view module, std::string_view name)
{
    m_bytes.push_back('c');
    m_bytes.append(module).push_back('\n');
    m_bytes.append(name).push_back('\n');
}

void PickleWriter::text(std::string_view value)
{
    m_bytes.push_back('X');
    put_le(m_bytes, value.size(), 4);
    m_bytes.append(value);
}

void PickleWriter::integer(int64_t value)
{
    if (value >= 0 && value < 256) {
        m_bytes.push_back('K');
        put_le(m_bytes, static_cast<uint64_t>(value), 1);
    } else if (value >= INT32_MIN && value <= INT32_MAX) {
        m_bytes.push_back('J');
        put_le(m_bytes, static_cast<uint32_t>(static_cast<int32_t>(value)), 4);
    } else { // LONG1: little-endian two's complement, 8 bytes always suffice
        m_bytes.push_back('\x8a');
        m_bytes.push_back(8);
        put_le(m_bytes, static_cast<uint64_t>(value), 8);
    }
}

void PickleWriter::boolean(bool value)
{
    m_bytes.push_back(value ? '\x88' : '\x89');
}
void PickleWriter::none()
{
    m_bytes.push_back('N');
}
void PickleWriter::mark()
{
    m_bytes.push_back('(');
}
void PickleWriter::tuple()
{
    m_bytes.push_back('t');
}
void PickleWriter::empty_tuple()
{
    m_bytes.push_back(')');
}
void PickleWriter::empty_dict()
{
    m_bytes.push_back('}');
}
void PickleWriter::empty_list()
{
    m_bytes.push_back(']');
}
void PickleWriter::set_items()
{
    m_bytes.push_back('u');
}
void PickleWriter::append()
{
    m_bytes.push_back('a');
}
void PickleWriter::reduce()
{
    m_bytes.push_back('R');
}
void PickleWriter::new_object()
{
    m_bytes.push_back('\x81');
}
void PickleWriter::build()
{
    m_bytes.push_back('b');
}
void PickleWriter::persistent_id()
{
    m_bytes.push_back('Q');
}

void PickleWriter::begin_object(std::string_view module, std::string_view name)
{
    global(module, name);
    empty_tuple();
    new_object();
    empty_dict();
    mark();
}

void PickleWriter::end_object()
{
    set_items();
    build();
}

} // namespace shardscope::convert
