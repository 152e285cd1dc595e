#pragma once
// The S3 server of this test run (scripts/s3-test-server.sh, started once per ctest run as the
// fixture `s3_server`): its endpoint and keys, read from the env.sh the script writes.

#include "core/storage/s3.h"

#include <QCoreApplication>
#include <QDateTime>
#include <QElapsedTimer>
#include <QFile>
#include <QProcess>
#include <QTemporaryDir>
#include <QThread>
#include <QtGlobal>
#include <csignal>
#include <fstream>
#include <map>
#include <string>
#include <sys/types.h>

namespace s3test {

inline std::map<std::string, std::string> server_env()
{
    std::map<std::string, std::string> out;
    const QByteArray file = qgetenv("SHARDSCOPE_S3_ENV");
    std::ifstream in(file.toStdString());
    std::string line;
    while (std::getline(in, line)) {
        if (!line.starts_with("export "))
            continue;
        const auto eq = line.find('=');
        if (eq != std::string::npos)
            out[line.substr(7, eq - 7)] = line.substr(eq + 1);
    }
    return out;
}

inline shardscope::storage::S3Config server_config()
{
    const auto env = server_env();
    const auto get = [&](const char* k) { return env.contains(k) ? env.at(k) : std::string(); };
    return {
        .endpoint = get("SHARDSCOPE_S3_ENDPOINT"),
        .region = get("AWS_DEFAULT_REGION"),
        .credentials = {.access_key_id = get("AWS_ACCESS_KEY_ID"), .secret_access_key = get("AWS_SECRET_ACCESS_KEY")}};
}

// A bucket name of its own for each test program and run, so that suites never see each other's
// objects on the shared server.
inline std::string fresh_bucket(const std::string& stem)
{
    return stem + "-" + std::to_string(QCoreApplication::applicationPid()) + "-" +
        std::to_string(QDateTime::currentMSecsSinceEpoch() % 100000000);
}

// scripts/s3-fault-proxy.py between a client and the server, for as long as the object lives.
// endpoint() is empty when the proxy did not come up within 10 s.
class FaultProxy {
public:
    explicit FaultProxy(const std::string& upstream)
    {
        const QString port_file = m_dir.filePath(QStringLiteral("port"));
        m_proxy.start(QStringLiteral("python3"),
                      {QStringLiteral(SHARDSCOPE_SOURCE_DIR "/scripts/s3-fault-proxy.py"), QStringLiteral("--upstream"),
                       QString::fromStdString(upstream), QStringLiteral("--port"), QStringLiteral("0"),
                       QStringLiteral("--port-file"), port_file, QStringLiteral("--lifetime"), QStringLiteral("300")});
        QElapsedTimer waited;
        waited.start();
        while (m_proxy.state() != QProcess::NotRunning && QFile(port_file).size() == 0 && waited.elapsed() < 10000)
            QThread::msleep(20);
        QFile f(port_file);
        if (f.open(QIODevice::ReadOnly) && f.size() > 0)
            m_endpoint = "http://127.0.0.1:" + QString::fromUtf8(f.readAll()).trimmed().toStdString();
    }
    ~FaultProxy()
    {
        m_proxy.terminate();
        m_proxy.waitForFinished(5000);
    }
    const std::string& endpoint() const { return m_endpoint; }
    // Sets the fault ("mode=503&count=3", "mode=none", ...); false when the proxy refused it.
    bool fault(const char* query) const
    {
        QProcess curl;
        curl.start(QStringLiteral("curl"),
                   {QStringLiteral("-sf"), QStringLiteral("-X"), QStringLiteral("POST"),
                    QString::fromStdString(m_endpoint + "/__fault__?" + query)});
        return curl.waitForFinished(10000) && curl.exitStatus() == QProcess::NormalExit && curl.exitCode() == 0;
    }

    // How many requests the proxy has passed to the server so far, and how many faults it has
    // injected (-1 when it cannot be asked).
    int forwarded() const { return counter("forwarded"); }
    int injected() const { return counter("injected"); }

private:
    int counter(const char* name) const
    {
        QProcess curl;
        curl.start(QStringLiteral("curl"), {QStringLiteral("-sf"), QString::fromStdString(m_endpoint + "/__fault__")});
        if (!curl.waitForFinished(10000) || curl.exitCode() != 0)
            return -1;
        const QByteArray state = curl.readAllStandardOutput();
        const QByteArray key = QByteArray("\"") + name + "\": ";
        const int at = state.indexOf(key);
        return at < 0 ? -1 : state.mid(at + key.size()).split(',').first().split('}').first().trimmed().toInt();
    }

    QTemporaryDir m_dir;
    QProcess m_proxy;
    std::string m_endpoint;
};

// One more gateway of this run's cluster (scripts/s3-test-server.sh gateway): the same buckets
// and keys on an address of its own, for a test that kills a gateway mid-upload while the first
// keeps serving the other suites. Stopped when the object goes.
class ExtraGateway {
public:
    ExtraGateway() { start(); }
    ~ExtraGateway()
    {
        if (m_pid > 0)
            ::kill(m_pid, SIGTERM);
    }
    const std::string& endpoint() const { return m_endpoint; } // empty when it did not come up
    // SIGKILL, as a crashed or power-cut gateway: connections reset, nothing cleaned up.
    void kill()
    {
        if (m_pid <= 0)
            return;
        ::kill(m_pid, SIGKILL);
        QElapsedTimer waited;
        waited.start();
        while (::kill(m_pid, 0) == 0 && waited.elapsed() < 10000)
            QThread::msleep(20);
        m_pid = 0;
    }
    // A gateway again on the same address; false when it did not answer.
    bool restart()
    {
        start();
        return !m_endpoint.empty();
    }

private:
    void start()
    {
        const auto env = server_env();
        const auto state = env.find("SHARDSCOPE_S3_STATE");
        if (state == env.end())
            return;
        QStringList args = {QStringLiteral(SHARDSCOPE_SOURCE_DIR "/scripts/s3-test-server.sh"),
                            QStringLiteral("gateway"), QString::fromStdString(state->second)};
        if (m_port > 0)
            args << QString::number(m_port);
        QProcess script;
        script.start(QStringLiteral("bash"), args);
        m_endpoint.clear();
        if (!script.waitForFinished(60000) || script.exitCode() != 0)
            return;
        const QStringList out = QString::fromUtf8(script.readAllStandardOutput()).trimmed().split(QLatin1Char(' '));
        if (out.size() != 2)
            return;
        m_endpoint = out[0].toStdString();
        m_pid = out[1].toInt();
        m_port = out[0].section(QLatin1Char(':'), -1).toInt();
    }

    std::string m_endpoint;
    pid_t m_pid = 0;
    int m_port = 0;
};

} // namespace s3test
